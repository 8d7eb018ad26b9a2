package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
)

func TestAuthenticate(t *testing.T) {
	keys := NewKeys([]config.Key{
		{Name: "dev", Key: "sk-dev"},
		{Name: "narrow", Key: "sk-narrow", Models: []string{"m1"}},
		{Name: "empty", Key: ""},
	})
	tests := []struct {
		name    string
		header  string
		wantKey string
		wantErr error
	}{
		{"no header", "", "", ErrMissingKey},
		{"not bearer", "Basic abc", "", ErrNotBearer},
		{"bare key", "sk-dev", "", ErrNotBearer},
		{"bearer alone", "Bearer", "", ErrMissingKey},
		{"lower-case scheme", "bearer sk-dev", "dev", nil},
		{"x-api-key", "x-api-key:sk-dev", "dev", nil},
		{"x-api-key unknown", "x-api-key:sk-nope", "", ErrUnknownKey},
		{"empty bearer", "Bearer ", "", ErrMissingKey},
		{"unknown", "Bearer sk-nope", "", ErrUnknownKey},
		{"prefix of a key", "Bearer sk-de", "", ErrUnknownKey},
		{"dev", "Bearer sk-dev", "dev", nil},
		{"lower-case scheme", "bearer sk-narrow", "narrow", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if k, ok := strings.CutPrefix(tt.header, "x-api-key:"); ok {
				r.Header.Set("X-Api-Key", k)
			} else if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			p, err := keys.Authenticate(r)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if got := p.keyID(); got != tt.wantKey {
				t.Errorf("got key %q, want %q", got, tt.wantKey)
			}
		})
	}
}

func (p *Principal) keyID() string {
	if p == nil {
		return ""
	}
	return p.KeyID
}

func TestAllowed(t *testing.T) {
	all := &Principal{KeyID: "a"}
	narrow := &Principal{KeyID: "n", Models: []string{"m1"}}
	var none *Principal
	for _, tt := range []struct {
		name  string
		p     *Principal
		model string
		want  bool
	}{
		{"all models", all, "anything", true},
		{"listed", narrow, "m1", true},
		{"not listed", narrow, "m2", false},
		{"nil principal", none, "m1", false},
	} {
		if got := tt.p.Allowed(tt.model); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMiddleware(t *testing.T) {
	keys := NewKeys([]config.Key{{Name: "dev", Key: "sk-dev"}})
	var gotErr error
	h := keys.Middleware(func(w http.ResponseWriter, _ *http.Request, err error) {
		gotErr = err
		w.WriteHeader(http.StatusUnauthorized)
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(FromContext(r.Context()).KeyID))
	}))
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer sk-dev")
	h.ServeHTTP(rec, r)
	if rec.Body.String() != "dev" {
		t.Errorf("got body %q, want %q", rec.Body.String(), "dev")
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusUnauthorized || !errors.Is(gotErr, ErrMissingKey) {
		t.Errorf("got %d %v, want 401 %v", rec.Code, gotErr, ErrMissingKey)
	}
}
