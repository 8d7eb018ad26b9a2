// Package auth authenticates gateway requests: it finds the static key of an
// "Authorization: Bearer" header in constant time and puts the key's
// principal (name and allowed models) in the request context. The secret
// itself never leaves this package: callers see the key's name only. The
// admin key guards the admin API (Admin), and a Throttle slows whoever
// guesses it.
package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/streamgate/streamgate/internal/config"
)

// Errors of Authenticate; the gateway answers each with 401.
var (
	ErrMissingKey = errors.New("missing API key: send \"Authorization: Bearer <key>\" (or \"x-api-key: <key>\")")
	ErrUnknownKey = errors.New("invalid API key")
	// ErrNotBearer: an Authorization header without the "Bearer " scheme
	// (a bare key, or "Basic …").
	ErrNotBearer = errors.New("malformed Authorization header: send \"Authorization: Bearer <key>\" (the \"Bearer \" scheme is missing)")
)

// Principal is who a request acts for.
type Principal struct {
	KeyID      string   // the key's name, safe to log
	Models     []string // models the key may use; empty means all
	MaxStreams int      // the key's concurrent request limit; 0: the gateway's per-key default
	RPM, TPM   int      // requests and tokens per minute; 0: no limit
	// BudgetUSD per BudgetPeriod (month, day, total); 0: no budget.
	BudgetUSD    float64
	BudgetPeriod string
	// ExpiresAt is when the key stops working; zero: never. Checked at each
	// use, so a cached key expires on time.
	ExpiresAt time.Time
	// Team is the key's team ("" none): its limits apply too, and the
	// ledger records it on each of the key's requests.
	Team string
	// ModelBudgets are the key's budgets for single models.
	ModelBudgets []config.ModelBudget
	// MCPTools are the globs of the MCP tools the key may use (a static
	// key's keys[].mcp_tools, a database key's mcp_tools); empty: every
	// tool.
	MCPTools []string
}

// Allowed reports whether the principal may use model, by the key's rule
// (config.Key.Allows: no models listed means all). A nil Principal may use none.
func (p *Principal) Allowed(model string) bool {
	if p == nil {
		return false
	}
	k := config.Key{Models: p.Models}
	return k.Allows(model)
}

type entry struct {
	sum [sha256.Size]byte
	p   *Principal
}

// Keys is an immutable set of static keys, safe for concurrent use. The zero
// value knows no key.
type Keys struct {
	entries []entry
	source  Source // nil: static keys only
}

// NewKeys returns the set of the config's keys. Keys with an empty secret are skipped.
func NewKeys(keys []config.Key) *Keys {
	k := &Keys{}
	for _, c := range keys {
		if c.Key == "" {
			continue
		}
		k.entries = append(k.entries, entry{sum: sha256.Sum256([]byte(c.Key)), p: &Principal{KeyID: c.Name, Models: c.Models, MaxStreams: c.MaxStreams, RPM: c.RPM, TPM: c.TPM,
			BudgetUSD: c.BudgetUSD, BudgetPeriod: cmp.Or(c.BudgetPeriod, "month"), Team: c.Team, ModelBudgets: c.ModelBudgets, MCPTools: c.MCPTools}})
	}
	return k
}

// Lookup returns the principal of secret. Secrets are hashed to a fixed
// length and compared with every key in constant time, so neither the length
// nor the position of a match shows in the timing.
func (k *Keys) Lookup(secret string) (*Principal, bool) {
	sum := sha256.Sum256([]byte(secret))
	var found *Principal
	for i := range k.entries {
		if subtle.ConstantTimeCompare(sum[:], k.entries[i].sum[:]) == 1 {
			found = k.entries[i].p
		}
	}
	return found, found != nil
}

// Authenticate returns the principal of r's key: "Authorization: Bearer
// <key>", or, without an Authorization header, "x-api-key: <key>" (how
// Anthropic's clients send it). It returns ErrMissingKey when there is
// none, ErrNotBearer when the Authorization header has another form,
// ErrUnknownKey when the key matches no key.
func (k *Keys) Authenticate(r *http.Request) (*Principal, error) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		if key := strings.TrimSpace(r.Header.Get("X-Api-Key")); key != "" {
			return k.principal(r.Context(), key)
		}
		return nil, ErrMissingKey
	}
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		if strings.EqualFold(h, "bearer") {
			return nil, ErrMissingKey
		}
		return nil, ErrNotBearer
	}
	secret := strings.TrimSpace(h[len(prefix):])
	if secret == "" {
		return nil, ErrMissingKey
	}
	return k.principal(r.Context(), secret)
}

func (k *Keys) principal(ctx context.Context, secret string) (*Principal, error) {
	if p, ok := k.Lookup(secret); ok {
		return p, nil
	}
	if k.source != nil {
		p, err := k.source.Lookup(ctx, secret)
		if err == nil && !p.ExpiresAt.IsZero() && !time.Now().Before(p.ExpiresAt) {
			return nil, fmt.Errorf("%w on %s", ErrExpiredKey, p.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if err == nil || !errors.Is(err, ErrUnknownKey) {
			return p, err // found, revoked, or the store failed
		}
	}
	return nil, diagnose(secret)
}

// Errors of keys found but not usable; both are 401s.
var (
	ErrRevokedKey = errors.New("API key revoked: ask for a new one")
	ErrExpiredKey = errors.New("API key expired")
)

// diagnose says why secret, which matches no key, is wrong when its form
// shows it: quotes, whitespace, another vendor's key. The message depends
// on the secret's form only, never on whether some key exists.
func diagnose(secret string) error {
	switch {
	case strings.HasPrefix(secret, `"`) || strings.HasSuffix(secret, `"`) || strings.HasPrefix(secret, "'") || strings.HasSuffix(secret, "'"):
		return fmt.Errorf("%w: it is wrapped in quotes; send the key alone", ErrUnknownKey)
	case strings.ContainsFunc(secret, unicode.IsSpace):
		return fmt.Errorf("%w: it contains whitespace; send the key alone, on one line", ErrUnknownKey)
	case strings.HasPrefix(secret, "sk-ant-"):
		return fmt.Errorf("%w: this is an Anthropic API key; send a key of this gateway instead (the provider keys stay in the gateway's config)", ErrUnknownKey)
	case strings.HasPrefix(secret, "AIza"):
		return fmt.Errorf("%w: this is a Google API key; send a key of this gateway instead (the provider keys stay in the gateway's config)", ErrUnknownKey)
	case strings.HasPrefix(secret, "sk-"):
		return fmt.Errorf("%w: this looks like an OpenAI API key; send a key of this gateway instead (the provider keys stay in the gateway's config)", ErrUnknownKey)
	}
	return ErrUnknownKey
}

// Source finds keys kept outside the config: the database's virtual keys.
// Lookup returns ErrUnknownKey when secret is none of them, ErrRevokedKey
// or ErrExpiredKey (wrapped) for one that may no longer be used.
type Source interface {
	Lookup(ctx context.Context, secret string) (*Principal, error)
}

// WithSource returns k with src consulted for secrets that are not static keys.
func (k *Keys) WithSource(src Source) *Keys {
	out := *k
	out.source = src
	return &out
}

// Middleware authenticates every request before next; a failure goes to
// onError (the gateway's error writer) and next is not called.
func (k *Keys) Middleware(onError func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := k.Authenticate(r)
			if err != nil {
				onError(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal in ctx, nil when there is none.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// ErrAdminOff: the admin API was asked for and no admin_key is configured.
var ErrAdminOff = errors.New("the admin API is off: set admin_key in the config to use /admin/")

// ErrAdminKey: a request to the admin API without the admin key.
var ErrAdminKey = errors.New("invalid admin key: send \"Authorization: Bearer <admin_key>\"")

// Admin guards the admin API with adminKey, compared in constant time
// (hashed first, so its length does not show either). An empty adminKey
// turns the admin API off: every request gets ErrAdminOff. th counts the
// wrong keys per client and refuses a client that tried too many (a
// *ThrottledError) before its key is even compared; nil: no throttle.
func Admin(adminKey string, th *Throttle, onError func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	sum := sha256.Sum256([]byte(adminKey))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if adminKey == "" {
				onError(w, r, ErrAdminOff)
				return
			}
			if err := th.Check(r); err != nil {
				onError(w, r, err)
				return
			}
			secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			got := sha256.Sum256([]byte(strings.TrimSpace(secret)))
			if !ok || subtle.ConstantTimeCompare(got[:], sum[:]) != 1 {
				if ok {
					th.Fail(r) // a key was tried; a missing header guesses nothing
				}
				onError(w, r, ErrAdminKey)
				return
			}
			th.Succeed(r)
			next.ServeHTTP(w, r)
		})
	}
}
