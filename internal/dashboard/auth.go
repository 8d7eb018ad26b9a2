package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
)

// cookieName holds the login token; cookieTTL is how long one login lasts.
const (
	cookieName = "streamgate_dashboard"
	cookieTTL  = 12 * time.Hour
)

// authenticator decides who may see the dashboard: everyone when the config
// says so (dashboard.open), else whoever logged in, with the admin key or a
// one-time login link. Where the gateway listens and what Host a request
// names decide nothing: a reverse proxy on the same machine makes any
// request look local. The cookie holds an HMAC of an expiry under the admin
// key (or, without one, under a secret of this process), never the key: a
// cookie that leaks gives at most cookieTTL of read access.
type authenticator struct {
	open     bool // dashboard.open: no credential asked
	adminKey string
	keySum   [sha256.Size]byte
	macKey   []byte         // signs the login cookie: the admin key, else random
	link     *loginLink     // the one-time login link; never nil
	th       *auth.Throttle // wrong admin keys per client; nil: none
}

func newAuthenticator(open bool, adminKey string, th *auth.Throttle) authenticator {
	mac := []byte(adminKey)
	if adminKey == "" {
		// Only a login link logs in then; its cookies end with the process.
		mac = make([]byte, 32)
		_, _ = rand.Read(mac) // never fails (crypto/rand, Go ≥ 1.24)
	}
	return authenticator{open: open, adminKey: adminKey, keySum: sha256.Sum256([]byte(adminKey)), macKey: mac, link: &loginLink{}, th: th}
}

// loginLink is the one-time login token of /dashboard?token=…, as notebook
// servers print one at start: random, kept as its hash, compared in
// constant time, gone once used.
type loginLink struct {
	mu      sync.Mutex
	sum     [sha256.Size]byte // the pending token's hash
	pending bool              // a token was issued and not used yet
	issued  bool              // a token was ever issued
}

// issue returns a fresh token (48 hex digits, 192 bits from crypto/rand);
// one issued before and not used yet is no longer valid.
func (l *loginLink) issue() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	tok := hex.EncodeToString(b[:])
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sum, l.pending, l.issued = sha256.Sum256([]byte(tok)), true, true
	return tok
}

// use reports whether tok is the pending token, and if so spends it: the
// same token never logs in twice.
func (l *loginLink) use(tok string) bool {
	got := sha256.Sum256([]byte(tok))
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.pending || subtle.ConstantTimeCompare(got[:], l.sum[:]) != 1 {
		return false
	}
	l.sum, l.pending = [sha256.Size]byte{}, false
	return true
}

// linkOnly reports whether a login link is the only way in: no admin key,
// and a link was issued (the embedded default of `streamgate serve`).
func (a authenticator) linkOnly() bool {
	if a.adminKey != "" {
		return false
	}
	a.link.mu.Lock()
	defer a.link.mu.Unlock()
	return a.link.issued
}

// check returns nil when r may see the dashboard: open, or with a valid
// login cookie, or with "Authorization: Bearer <admin key>" (scripts).
// Else why not (see refuse): errOff, errLink, errLogin, or tryKey's error.
func (a authenticator) check(r *http.Request) error {
	if a.open {
		return nil
	}
	if c, err := r.Cookie(cookieName); err == nil && a.validToken(c.Value, time.Now()) {
		return nil
	}
	if a.adminKey == "" {
		if a.linkOnly() {
			return errLink
		}
		return errOff
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
	errOff      = errors.New("the dashboard needs admin_key in the config to log in with (or dashboard: {open: true} to ask for no credential)")
	errLink     = errors.New("log in at /dashboard with the one-time link streamgate serve printed first (this gateway has no admin_key)")
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
// and the HMAC-SHA256 of it under macKey.
func (a authenticator) token(exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	mac := hmac.New(sha256.New, a.macKey)
	mac.Write([]byte("streamgate-dashboard\x00" + e))
	return e + "." + hex.EncodeToString(mac.Sum(nil))
}

// validToken reports whether v is a token of this macKey (this admin key, or
// this process when there is none) that has not expired at now.
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
