package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// A key that matches nothing gets a 401 whose message says what is wrong
// when its form shows it, the same whether or not the key, written
// properly, exists.
func TestUnknownKeyDiagnosis(t *testing.T) {
	keys := NewKeys([]config.Key{{Name: "dev", Key: "sg-dev-123"}})
	tests := []struct {
		name, header, want string
	}{
		{"quoted existing key", `Bearer "sg-dev-123"`, "wrapped in quotes"},
		{"quoted unknown key", `Bearer "sg-nope-999"`, "wrapped in quotes"},
		{"single quotes", `Bearer 'sg-dev-123'`, "wrapped in quotes"},
		{"inner space", "Bearer sg-dev 123", "contains whitespace"},
		{"anthropic", "Bearer sk-ant-api03-abc", "Anthropic API key"},
		{"openai", "Bearer sk-proj-abc", "OpenAI API key"},
		{"google", "Bearer AIzaSyabc", "Google API key"},
		{"plain unknown", "Bearer sg-nope", "invalid API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set("Authorization", tt.header)
			_, err := keys.Authenticate(r)
			if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrUnknownKey saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "sg-dev-123") || strings.Contains(err.Error(), "abc") {
				t.Errorf("message %q repeats the secret", err)
			}
		})
	}
	// A static key that looks like another vendor's is still a key.
	keys = NewKeys([]config.Key{{Name: "dev", Key: "sk-proj-mine"}})
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Authorization", "Bearer sk-proj-mine")
	if p, err := keys.Authenticate(r); err != nil || p.KeyID != "dev" {
		t.Errorf("static sk- key: got %v, %v; want dev", p, err)
	}
}

// countingSource answers from a map and counts its lookups.
type countingSource struct {
	keys  map[string]*Principal
	fail  atomic.Bool
	calls atomic.Int64
}

func (s *countingSource) Lookup(_ context.Context, secret string) (*Principal, error) {
	s.calls.Add(1)
	if s.fail.Load() {
		return nil, fmt.Errorf("%w: connection refused", ErrKeyStore)
	}
	if p, ok := s.keys[secret]; ok {
		return p, nil
	}
	return nil, ErrUnknownKey
}

// Keys from a Source: found through the cache, which keeps answers (and
// absences) for its TTL and never a store failure.
func TestSourceCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &countingSource{keys: map[string]*Principal{"sg-db": {KeyID: "db"}}}
		cache := NewCache(src, time.Second)
		keys := NewKeys(nil).WithSource(cache)
		auth := func(secret string) (*Principal, error) {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set("Authorization", "Bearer "+secret)
			return keys.Authenticate(r)
		}
		for range 5 {
			if p, err := auth("sg-db"); err != nil || p.KeyID != "db" {
				t.Fatalf("got %v, %v; want db", p, err)
			}
			if _, err := auth("sg-other"); !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("unknown: got %v, want ErrUnknownKey", err)
			}
		}
		if n := src.calls.Load(); n != 2 {
			t.Errorf("store lookups: got %d, want 2 (one per secret within the TTL)", n)
		}
		// A revocation reaches the gateway within the TTL, or at once
		// when the store says so (Purge).
		delete(src.keys, "sg-db")
		if p, err := auth("sg-db"); err != nil || p.KeyID != "db" {
			t.Fatalf("within the TTL: got %v, %v; want db still cached", p, err)
		}
		cache.Purge()
		if _, err := auth("sg-db"); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("after Purge: got %v, want the key gone at once", err)
		}
		src.keys["sg-db"] = &Principal{KeyID: "db"}
		time.Sleep(time.Second)
		if p, err := auth("sg-db"); err != nil || p.KeyID != "db" {
			t.Fatalf("after the TTL: got %v, %v; want db back", p, err)
		}
		delete(src.keys, "sg-db")
		time.Sleep(time.Second)
		if _, err := auth("sg-db"); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("after the TTL: got %v, want the key gone", err)
		}
		// A store failure is a 503's error, and not kept.
		src.fail.Store(true)
		time.Sleep(time.Second)
		if _, err := auth("sg-x"); !errors.Is(err, ErrKeyStore) {
			t.Errorf("store down: got %v, want ErrKeyStore", err)
		}
		src.fail.Store(false)
		src.keys["sg-x"] = &Principal{KeyID: "x"}
		if p, err := auth("sg-x"); err != nil || p.KeyID != "x" {
			t.Errorf("store back: got %v, %v; want x at once", p, err)
		}
	})
}
