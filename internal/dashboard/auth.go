package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
)

// cookieName holds the login token; cookieTTL is how long one login lasts.
const (
	cookieName = "streamgate_dashboard"
	cookieTTL  = 12 * time.Hour
)

// authenticator decides who may see the dashboard: anyone reaching a
// loopback gateway by a loopback name, else whoever logged in with the admin
// key. The cookie holds an HMAC of an expiry under the admin key, never the
// key: a cookie that leaks gives at most cookieTTL of read access.
type authenticator struct {
	listen   string // the gateway's address, for the page that says the dashboard is off
	loopback bool
	adminKey string
	keySum   [sha256.Size]byte
	th       *auth.Throttle // wrong admin keys per client; nil: none
}

func newAuthenticator(listen, adminKey string, th *auth.Throttle) authenticator {
	return authenticator{listen: listen, loopback: IsLoopback(listen), adminKey: adminKey, keySum: sha256.Sum256([]byte(adminKey)), th: th}
}

// IsLoopback reports whether addr (HOST:PORT or HOST) is on the loopback
// interface: 127.0.0.0/8, ::1 or localhost. "" and wildcard addresses
// (":8080", "0.0.0.0:8080") are not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// open reports whether r may see the dashboard without login: the gateway
// listens on loopback, and the request names a loopback host and carries no
// proxy's forwarding headers. A reverse proxy on the same machine, or a DNS
// name rebound to 127.0.0.1 by a web page, then still needs the login.
func (a authenticator) open(r *http.Request) bool {
	return a.loopback && IsLoopback(r.Host) &&
		r.Header.Get("X-Forwarded-For") == "" && r.Header.Get("Forwarded") == ""
}

// check returns nil when r may see the dashboard: open, or with a valid
// login cookie, or with "Authorization: Bearer <admin key>" (scripts).
// Else why not (see refuse): errOff, errLogin, or tryKey's error.
func (a authenticator) check(r *http.Request) error {
	if a.open(r) {
		return nil
	}
	if a.adminKey == "" {
		return errOff
	}
	if c, err := r.Cookie(cookieName); err == nil && a.validToken(c.Value, time.Now()) {
		return nil
	}
	if secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return a.tryKey(r, strings.TrimSpace(secret))
	}
	return errLogin
}

// tryKey checks a key r's client offered: a *auth.ThrottledError when the
// client tried too many wrong ones (the key is then not compared),
// errWrongKey when it is not the admin key (counted against the client).
func (a authenticator) tryKey(r *http.Request, key string) error {
	if err := a.th.Check(r); err != nil {
		return err
	}
	if !a.keyMatches(key) {
		a.th.Fail(r)
		return errWrongKey
	}
	a.th.Succeed(r)
	return nil
}

// Why check refused a request.
var (
	errOff      = errors.New("the dashboard of a gateway not listening on loopback needs admin_key in the config")
	errLogin    = errors.New("log in at /dashboard with the admin key first")
	errWrongKey = errors.New("invalid admin key")
)

// refuse answers a request that check refused with err, as an OpenAI error.
func refuse(w http.ResponseWriter, err error) {
	var thr *auth.ThrottledError
	switch {
	case errors.As(err, &thr):
		w.Header().Set("Retry-After", api.RetryAfter(thr.RetryAfter))
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "too_many_wrong_admin_keys", err.Error())
	case err == errOff:
		writeError(w, http.StatusForbidden, "permission_error", "dashboard_off", err.Error())
	case err == errWrongKey:
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid_admin_key", err.Error())
	default:
		writeError(w, http.StatusUnauthorized, "authentication_error", "login_required", err.Error())
	}
}

// keyMatches compares secret with the admin key in constant time (of
// their hashes, so the key's length does not show either).
func (a authenticator) keyMatches(secret string) bool {
	if a.adminKey == "" {
		return false
	}
	got := sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(got[:], a.keySum[:]) == 1
}

// token is the cookie value for a login that lasts until exp: the expiry
// and the HMAC-SHA256 of it under the admin key.
func (a authenticator) token(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(a.adminKey))
	mac.Write([]byte("streamgate-dashboard\x00" + e))
	return e + "." + hex.EncodeToString(mac.Sum(nil))
}

// validToken reports whether v is a token of this admin key that has not
// expired at now.
func (a authenticator) validToken(v string, now time.Time) bool {
	e, _, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || now.Unix() >= exp {
		return false
	}
	return hmac.Equal([]byte(v), []byte(a.token(time.Unix(exp, 0))))
}

// cookie is the login cookie (value "" and a negative MaxAge deletes it).
// Secure when the request came over TLS, to the gateway or to a proxy that
// says so.
func cookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: cookieName, Value: value, Path: "/dashboard", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
	}
}
