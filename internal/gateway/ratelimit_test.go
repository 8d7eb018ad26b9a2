package gateway_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
	"github.com/streamgate/streamgate/internal/usage"
)

// sharedCallTimeout is the Redis call bound of the tests of limits shared
// between replicas: they test the sharing, and a 50 ms call slowed by a
// loaded machine (race-instrumented packages testing side by side) would
// take the outage path, where each replica counts alone.
const sharedCallTimeout = 2 * time.Second

func countStatus(t *testing.T, e *env, key string, n int) (ok, limited int) {
	t.Helper()
	for range n {
		resp := do(t, "POST", e.url+"/v1/chat/completions", key, chatBody("m-sim", false, ""))
		io.Copy(io.Discard, resp.Body)
		switch resp.StatusCode {
		case 200:
			ok++
		case 429:
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
		default:
			t.Errorf("got status %d", resp.StatusCode)
		}
	}
	return ok, limited
}

// A key's requests per minute: the next request past the limit gets 429
// rate_limit_exceeded naming the limit, recorded as rejected; a key's
// tokens per minute: counted from the usage of its finished requests.
func TestRateLimits(t *testing.T) {
	cfg := baseConfig()
	cfg.Keys = append(cfg.Keys, config.Key{Name: "rpm3", Key: "sk-rpm3", RPM: 3}, config.Key{Name: "tpm10", Key: "sk-tpm10", TPM: 10})
	e := start(t, cfg)
	if ok, limited := countStatus(t, e, "sk-rpm3", 5); ok != 3 || limited != 2 {
		t.Errorf("rpm 3: got %d served, %d limited; want 3 and 2", ok, limited)
	}
	resp := do(t, "POST", e.url+"/v1/chat/completions", "sk-rpm3", chatBody("m-sim", false, ""))
	if er := readError(t, resp); resp.StatusCode != 429 || !strings.Contains(er.Error.Message, "3 requests per minute") {
		t.Errorf("got %d %q, want 429 naming 3 requests per minute", resp.StatusCode, er.Error.Message)
	}
	// chatBody asks for 4 output tokens; the prompt adds a few: the first
	// request's tokens reach 10, the next is refused.
	if ok, limited := countStatus(t, e, "sk-tpm10", 3); ok != 1 || limited != 2 {
		t.Errorf("tpm 10: got %d served, %d limited; want 1 and 2", ok, limited)
	}
	entries := e.waitEntries(t, 9)
	rejected := 0
	for _, en := range entries {
		if en.Status == 429 && en.Outcome == usage.OutcomeRejected {
			rejected++
		}
	}
	if rejected != 5 {
		t.Errorf("got %d rejected entries with 429, want 5", rejected)
	}
	resp = do(t, "GET", e.url+"/readyz", "", "")
	var ready struct {
		RateLimits string `json:"rate_limits"`
	}
	json.NewDecoder(resp.Body).Decode(&ready)
	if ready.RateLimits != "local" {
		t.Errorf("/readyz rate_limits: got %q, want local", ready.RateLimits)
	}
}

// With redis: two gateways (two replicas) share one key's limit: its
// combined requests stay within its rpm.
func TestRateLimitsAcrossReplicas(t *testing.T) {
	url := redistest.URL(t)
	var b [6]byte
	rand.Read(b[:])
	name := "rl-" + hex.EncodeToString(b[:]) // a key of its own in Redis, whatever ran before
	cfg := baseConfig()
	cfg.Redis = url
	cfg.Keys = append(cfg.Keys, config.Key{Name: name, Key: "sk-shared", RPM: 6})
	a := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout})
	bb := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout})
	okA, _ := countStatus(t, a, "sk-shared", 5)
	okB, _ := countStatus(t, bb, "sk-shared", 5)
	if okA+okB != 6 || okA != 5 {
		t.Errorf("got %d + %d served, want 5 + 1: one limit of 6 for both replicas", okA, okB)
	}
	resp := do(t, "GET", a.url+"/readyz", "", "")
	var ready struct {
		RateLimits string `json:"rate_limits"`
	}
	json.NewDecoder(resp.Body).Decode(&ready)
	if ready.RateLimits != "redis" {
		t.Errorf("/readyz rate_limits: got %q, want redis", ready.RateLimits)
	}

	// Redis unreachable: the gateway keeps serving with local limits and says so.
	cfg.Redis = "redis://127.0.0.1:1/0"
	cfg.Keys[len(cfg.Keys)-1].Name = name + "-local"
	c := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1})
	if ok, limited := countStatus(t, c, "sk-shared", 8); ok != 6 || limited != 2 {
		t.Errorf("redis down: got %d served, %d limited; want the local limit: 6 and 2", ok, limited)
	}
	resp = do(t, "GET", c.url+"/readyz", "", "")
	json.NewDecoder(resp.Body).Decode(&ready)
	if !strings.HasPrefix(ready.RateLimits, "local (redis unreachable") {
		t.Errorf("/readyz rate_limits with redis down: got %q", ready.RateLimits)
	}
}
