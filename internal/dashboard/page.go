package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
)

// The page and the login form, built into the binary: no file to deploy,
// nothing fetched from elsewhere (the CSP forbids it too).
//
//go:embed assets/index.html assets/login.html
var assets embed.FS

var (
	indexHTML = must(assets.ReadFile("assets/index.html"))
	loginHTML = must(assets.ReadFile("assets/login.html"))
	loginPage = template.Must(template.New("login").Parse(string(loginHTML)))

	// Content-Security-Policy of each page: its own inline script and
	// style by hash, and nothing else but its event stream and form posts.
	indexCSP = "default-src 'none'; script-src " + inlineHash(indexHTML, "script") + "; style-src " + inlineHash(indexHTML, "style") +
		"; connect-src 'self'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	loginCSP = "default-src 'none'; img-src data:; style-src " + inlineHash(loginHTML, "style") +
		"; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// inlineHash is the CSP source ('sha256-…') of the one <tag> element of
// page; the pages are fixed at build time, and their tests load them.
func inlineHash(page []byte, tag string) string {
	_, rest, ok := bytes.Cut(page, []byte("<"+tag+">"))
	body, _, ok2 := bytes.Cut(rest, []byte("</"+tag+">"))
	if !ok || !ok2 {
		panic("dashboard: no <" + tag + "> in an embedded page")
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// securityHeaders are set on both pages.
func securityHeaders(h http.Header, csp string) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// servePage serves the dashboard to whoever may see it, else the login
// form, or the page that says the dashboard needs admin_key. A GET with
// ?token= is a login link (linkLogin).
func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed: use GET")
		return
	}
	if r.Method == http.MethodGet && r.URL.Query().Has("token") {
		d.linkLogin(w, r)
		return
	}
	if d.auth.check(r) != nil {
		d.loginForm(w, http.StatusOK, "")
		return
	}
	securityHeaders(w.Header(), indexCSP)
	w.Write(indexHTML)
}

// loginForm writes the login form with message; without an admin key, the
// page that says to use the login link serve printed, or the one that says
// the dashboard needs admin_key (403) when there is no link either.
func (d *Dashboard) loginForm(w http.ResponseWriter, status int, message string) {
	linkOnly := d.auth.linkOnly()
	off := d.auth.adminKey == "" && !linkOnly
	if off {
		status = http.StatusForbidden
	}
	securityHeaders(w.Header(), loginCSP)
	w.WriteHeader(status)
	loginPage.Execute(w, struct {
		Off, LinkOnly bool
		Message       string
	}{off, linkOnly, message})
}

// linkLogin logs in with a one-time login link (NewLoginToken): the token
// is spent, the login cookie set, and the browser sent on to /dashboard,
// so the token does not stay in its address bar or history. A token used
// already or never issued counts against the client as a wrong admin key.
func (d *Dashboard) linkLogin(w http.ResponseWriter, r *http.Request) {
	var thr *auth.ThrottledError
	if errors.As(d.auth.th.Check(r), &thr) {
		w.Header().Set("Retry-After", api.RetryAfter(thr.RetryAfter))
		d.loginForm(w, http.StatusTooManyRequests, "Too many wrong logins from your address: try again in "+api.RetryAfter(thr.RetryAfter)+" s.")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	switch {
	case d.auth.link.use(r.URL.Query().Get("token")):
		d.auth.th.Succeed(r)
		http.SetCookie(w, cookie(r, d.auth.token(time.Now().Add(cookieTTL)), int(cookieTTL/time.Second)))
	case d.auth.check(r) == nil:
		// Logged in already (an old link opened again): nothing to do.
	default:
		d.auth.th.Fail(r)
		d.log.Warn("dashboard: login with a used or unknown login link", slog.String("remote", r.RemoteAddr))
		d.loginForm(w, http.StatusUnauthorized, "This login link was used already or is not this gateway's: each link works once.")
		return
	}
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// login checks the admin key posted by the form and sets the login cookie.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	if q := r.URL.Query(); q.Has("admin_key") || q.Has("key") {
		// It would be in logs and the browser's history by now; refusing
		// it at least stops a habit from forming.
		d.loginForm(w, http.StatusBadRequest, "The admin key never goes in a URL: type it in the form.")
		return
	}
	if d.auth.open {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	key := strings.TrimSpace(r.PostFormValue("admin_key"))
	var thr *auth.ThrottledError
	switch err := d.auth.tryKey(r, key); {
	case errors.As(err, &thr):
		w.Header().Set("Retry-After", api.RetryAfter(thr.RetryAfter))
		d.loginForm(w, http.StatusTooManyRequests, "Too many wrong admin keys from your address: try again in "+api.RetryAfter(thr.RetryAfter)+" s.")
		return
	case err != nil:
		d.log.Warn("dashboard: login with a wrong admin key", slog.String("remote", r.RemoteAddr))
		d.loginForm(w, http.StatusUnauthorized, "Wrong admin key.")
		return
	}
	http.SetCookie(w, cookie(r, d.auth.token(time.Now().Add(cookieTTL)), int(cookieTTL/time.Second)))
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// logout deletes the login cookie. The token itself stays valid until it
// expires (nothing is stored server-side): rotate admin_key to end every
// login at once.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "method not allowed: use POST")
		return
	}
	http.SetCookie(w, cookie(r, "", -1))
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}
