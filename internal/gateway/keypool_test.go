package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sim"
)

// keyedUpstream is the simulator behind a door that answers per API key:
// a key in refuse gets that status (429 with Retry-After: 10, or 401)
// instead of the sim's answer. It counts the requests of each key and
// keeps the prompt_cache_key each request carried.
type keyedUpstream struct {
	url string

	mu        sync.Mutex
	refuse    map[string]int
	hits      map[string]int
	cacheKeys []string // the prompt_cache_key of each request, in order
}

func newKeyedUpstream(t *testing.T) *keyedUpstream {
	u := &keyedUpstream{refuse: map[string]int{}, hits: map[string]int{}}
	s := sim.New(sim.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		body, _ := io.ReadAll(r.Body)
		var b struct {
			PromptCacheKey string `json:"prompt_cache_key"`
		}
		json.Unmarshal(body, &b)
		u.mu.Lock()
		u.hits[key]++
		status := u.refuse[key]
		u.cacheKeys = append(u.cacheKeys, b.PromptCacheKey)
		u.mu.Unlock()
		switch status {
		case 0:
			r.Body = io.NopCloser(bytes.NewReader(body))
			s.ServeHTTP(w, r)
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "10")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL
	return u
}

func (u *keyedUpstream) set(key string, status int) {
	u.mu.Lock()
	u.refuse[key] = status
	u.mu.Unlock()
}

func (u *keyedUpstream) hitsOf(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[key]
}

// pooledConfig: one OpenAI provider of three keys on u, model "pooled"
// with affinity session.
func pooledConfig(u *keyedUpstream) *config.Config {
	cfg := baseConfig()
	cfg.AdminKey = "sk-admin"
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "oai", Kind: "openai", BaseURL: u.url + "/v1",
		APIKeys: []config.ProviderKey{{Name: "k1", Key: "sk-one"}, {Name: "k2", Key: "sk-two"}, {Name: "k3", Key: "sk-three"}}})
	cfg.Models = append(cfg.Models, config.Model{Name: "pooled", Affinity: "session",
		Routes: []config.Route{{Provider: "oai", Model: "sim-fast"}}, Price: config.Price{Input: 1, Output: 2}})
	return cfg
}

// placements sends one request per session and returns the provider key
// (by name, from the ledger) that served each.
func placements(t *testing.T, e *env, sessions int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range sessions {
		sid := fmt.Sprintf("session-%d", i)
		n := len(e.rec.all())
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", true, ""), "X-Session-Id", sid)
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: got %d, want 200", sid, resp.StatusCode)
		}
		en := e.waitEntries(t, n+1)[n]
		if en.ProviderKey == "" {
			t.Fatalf("%s: ledger entry without its provider key: %+v", sid, en)
		}
		out[sid] = en.ProviderKey
	}
	return out
}

// TestKeyPoolBenchMovesOnlyItsSessions: 30 sessions placed by affinity
// over three provider keys keep their key turn after turn; a 429 with
// Retry-After: 10 on one key benches that key alone (the request is served
// at once by another key, the route stays healthy), only its sessions
// move, each to one other key it then keeps, and the others stay where
// they were. The bench shows in /admin/routes and /metrics by key name,
// never the secret.
func TestKeyPoolBenchMovesOnlyItsSessions(t *testing.T) {
	u := newKeyedUpstream(t)
	e := start(t, pooledConfig(u))
	first := placements(t, e, 30)
	per := map[string]int{}
	for _, k := range first {
		per[k]++
	}
	if len(per) != 3 {
		t.Fatalf("30 sessions over 3 keys: got %v, want each key used", per)
	}
	if again := placements(t, e, 30); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("a second turn moved sessions: got %v, want %v", again, first)
	}

	u.set("sk-two", http.StatusTooManyRequests)
	before := u.hitsOf("sk-two")
	second := placements(t, e, 30)
	if got := u.hitsOf("sk-two") - before; got != 1 {
		t.Errorf("benched key: got %d requests after its 429, want 1 (the 429 itself)", got)
	}
	for sid, k := range first {
		switch {
		case k != "k2" && second[sid] != k:
			t.Errorf("%s moved from %s to %s, though only k2 was benched", sid, k, second[sid])
		case k == "k2" && second[sid] == "k2":
			t.Errorf("%s stayed on the benched key", sid)
		}
	}
	if third := placements(t, e, 30); fmt.Sprint(third) != fmt.Sprint(second) {
		t.Errorf("sessions moved off the benched key did not stay: got %v, want %v", third, second)
	}

	routes := getJSON(t, e.url+"/admin/routes")
	if !strings.Contains(routes, `"name":"k2"`) || !strings.Contains(routes, `"benched_until"`) || strings.Contains(routes, "sk-two") {
		t.Errorf("/admin/routes: got %s, want k2 benched by name, no secret", routes)
	}
	if !strings.Contains(routes, `"affinity":"session"`) || !strings.Contains(routes, `"state":"healthy"`) {
		t.Errorf("/admin/routes: got %s, want affinity session and the route healthy", routes)
	}
	fams := scrapeFamilies(t, e.url)
	if got, ok := seriesSum(fams, "streamgate_provider_key_benches_total", map[string]string{"provider": "oai", "key": "k2"}); !ok || got != 1 {
		t.Errorf("streamgate_provider_key_benches_total{key=k2}: got %v (%v), want 1", got, ok)
	}
	if got, ok := seriesSum(fams, "streamgate_provider_key_benched", map[string]string{"provider": "oai", "key": "k1"}); !ok || got != 0 {
		t.Errorf("streamgate_provider_key_benched{key=k1}: got %v (%v), want 0", got, ok)
	}
}

// TestKeyPoolRevokedKey: a key the provider refuses with 401 is disabled
// with one WARN naming the provider and the key (not the secret), the
// request is served by another key, the others keep serving; when every
// key is refused the client gets 503 naming the cause, and when every key
// is benched 429 with the keys' Retry-After.
func TestKeyPoolRevokedKey(t *testing.T) {
	u := newKeyedUpstream(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	e := startWith(t, gateway.Options{Config: pooledConfig(u), KeepAlive: -1,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	u.set("sk-one", http.StatusUnauthorized)
	placements(t, e, 10)
	if got := u.hitsOf("sk-one"); got != 1 {
		t.Errorf("revoked key: got %d requests, want 1 (the 401)", got)
	}
	mu.Lock()
	warn := logs.String()
	mu.Unlock()
	if strings.Count(warn, "provider key disabled") != 1 || !strings.Contains(warn, "key=k1") || !strings.Contains(warn, "provider=oai") || strings.Contains(warn, "sk-one") {
		t.Errorf("log: got %q, want one WARN naming provider oai and key k1, no secret", warn)
	}
	routes := getJSON(t, e.url+"/admin/routes")
	if !strings.Contains(routes, `"disabled":"the provider answered 401 Unauthorized"`) {
		t.Errorf("/admin/routes: got %s, want k1 disabled with its reason", routes)
	}
	if got, _ := seriesSum(scrapeFamilies(t, e.url), "streamgate_provider_key_disabled", map[string]string{"key": "k1"}); got != 1 {
		t.Errorf("streamgate_provider_key_disabled{key=k1}: got %v, want 1", got)
	}

	// Every key benched: 429 with the earliest Retry-After, no upstream call.
	u.set("sk-two", http.StatusTooManyRequests)
	u.set("sk-three", http.StatusTooManyRequests)
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", true, ""))
	io.Copy(io.Discard, resp.Body)
	hits := u.hitsOf("sk-two") + u.hitsOf("sk-three")
	resp = do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", true, ""))
	er := readError(t, resp)
	if resp.StatusCode != 429 || er.Error.Code == nil || *er.Error.Code != "provider_keys_exhausted" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("every key benched: got %d %+v Retry-After %q, want 429 provider_keys_exhausted with Retry-After", resp.StatusCode, er.Error, resp.Header.Get("Retry-After"))
	}
	if got := u.hitsOf("sk-two") + u.hitsOf("sk-three"); got != hits {
		t.Errorf("every key benched: the upstream got %d more requests, want none", got-hits)
	}
	if !strings.Contains(er.Error.Message, `"oai"`) {
		t.Errorf("message %q: want the provider named", er.Error.Message)
	}
}

// lockedWriter serialises writes of concurrent loggers to a buffer.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestAffinitySendsPromptCacheKey: an OpenAI route gets prompt_cache_key
// when the client sent none, the same for every turn of a session and
// different between sessions; a client's own is passed as it is.
func TestAffinitySendsPromptCacheKey(t *testing.T) {
	u := newKeyedUpstream(t)
	e := start(t, pooledConfig(u))
	for range 2 {
		for _, sid := range []string{"a", "b"} {
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", false, ""), "X-Session-Id", sid)
			io.Copy(io.Discard, resp.Body)
		}
	}
	resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", false, `,"prompt_cache_key":"mine"`))
	io.Copy(io.Discard, resp.Body)
	u.mu.Lock()
	defer u.mu.Unlock()
	k := u.cacheKeys
	if len(k) != 5 || k[0] == "" || k[0] != k[2] || k[1] == "" || k[1] != k[3] || k[0] == k[1] {
		t.Errorf("prompt_cache_key of turns a, b, a, b: got %q; want one stable non-empty key per session, different between them", k)
	}
	if len(k) == 5 && k[4] != "mine" {
		t.Errorf("client's own prompt_cache_key: got %q, want mine", k[4])
	}
}

func getJSON(t *testing.T, url string) string {
	t.Helper()
	resp := do(t, "GET", url, "sk-admin", "")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
