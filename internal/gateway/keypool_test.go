package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic1 "github.com/anthropics/anthropic-sdk-go"
	aoption1 "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/v2"
	openai2 "github.com/openai/openai-go/v2"
	option2 "github.com/openai/openai-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/keyshare"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
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

	// The operator restores the key: POST /admin/routes/oai/reset ends the
	// benches and enables the disabled key, which serves again.
	for _, k := range []string{"sk-one", "sk-two", "sk-three"} {
		u.set(k, 0)
	}
	resp = do(t, "POST", e.url+"/admin/routes/oai/reset", "sk-admin", "")
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"keys_enabled":["oai/k1"]`) {
		t.Errorf("reset: got %d %s, want 200 naming oai/k1 enabled", resp.StatusCode, b)
	}
	if routes := getJSON(t, e.url+"/admin/routes"); strings.Contains(routes, `"disabled"`) || strings.Contains(routes, `"benched_until"`) {
		t.Errorf("/admin/routes after reset: got %s, want no key disabled or benched", routes)
	}
	before := u.hitsOf("sk-one")
	placements(t, e, 10)
	if u.hitsOf("sk-one") == before {
		t.Errorf("after reset: k1 served none of 10 sessions, want it back in the pool")
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
	// A Responses client's (Codex's) prompt_cache_key reaches a chat route.
	resp = do(t, "POST", e.url+"/v1/responses", devKey, `{"model":"pooled","input":"hi","max_output_tokens":16,"store":false,"prompt_cache_key":"conv-9"}`)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("responses: got %d %s", resp.StatusCode, b)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	k := u.cacheKeys
	if len(k) != 6 || k[5] != "conv-9" {
		t.Errorf("a Responses request's prompt_cache_key upstream: got %q, want conv-9 last", k)
	}
	k = k[:min(len(k), 5)]
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

// TestAffinityKeepsCacheWarm: 8 conversations of 5 turns whose history
// grows, each turn on the in-process simulator, whose prompt cache is per
// API key. Over one key every turn after the first reads the history
// cached by the turn before; over a pool of three keys with affinity
// session the share of prompt tokens read from the cache is at least 90 %
// of that; with affinity off (the least loaded key, in turn) it falls. The
// ledger's cost is the sum of what each row's tokens cost at the model's
// prices, to the micro-dollar.
func TestAffinityKeepsCacheWarm(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	cfg.Timeouts.NonStream = config.Duration(10e9)
	pool := []config.ProviderKey{{Name: "s1", Key: "sim-key-1"}, {Name: "s2", Key: "sim-key-2"}, {Name: "s3", Key: "sim-key-3"}}
	cfg.Providers = []config.Provider{{Name: "one", Kind: "sim"}, {Name: "pool", Kind: "sim", APIKeys: pool}}
	cached := 0.5
	price := config.Price{Input: 2, Output: 8, CachedInput: &cached}
	cfg.Models = []config.Model{
		{Name: "single", Routes: []config.Route{{Provider: "one", Model: "sim-fast"}}, Price: price},
		{Name: "affinity", Affinity: "session", Routes: []config.Route{{Provider: "pool", Model: "sim-fast"}}, Price: price},
		{Name: "spread", Routes: []config.Route{{Provider: "pool", Model: "sim-fast"}}, Price: price},
	}
	e := start(t, cfg)
	// A system prompt every session shares, and a long first question of
	// each session's own: the history is what the cache must keep.
	system := strings.Repeat("You are a careful coding agent. Read the files before you edit them. ", 40)
	share := map[string]float64{}
	for _, model := range []string{"single", "affinity", "spread"} {
		for s := range 8 {
			msgs := []map[string]string{{"role": "system", "content": system},
				{"role": "user", "content": fmt.Sprintf("Session %d of %s. ", s, model) + strings.Repeat(fmt.Sprintf("Here is file %d of the repository, line by line. ", s), 60)}}
			for turn := range 5 {
				body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 40, "messages": msgs})
				resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, string(body))
				var out struct {
					Choices []struct {
						Message struct{ Content string } `json:"message"`
					} `json:"choices"`
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || len(out.Choices) == 0 {
					t.Fatalf("%s session %d turn %d: got %d %s", model, s, turn, resp.StatusCode, b)
				}
				msgs = append(msgs, map[string]string{"role": "assistant", "content": out.Choices[0].Message.Content},
					map[string]string{"role": "user", "content": fmt.Sprintf("Now change line %d.", turn)})
			}
		}
	}
	entries := e.waitEntries(t, 3*8*5)
	in, read := map[string]int{}, map[string]int{}
	for _, en := range entries {
		in[en.Model] += en.InputTokens
		read[en.Model] += en.CacheReadTokens
		want := (float64(en.InputTokens-en.CacheReadTokens)*2 + float64(en.CacheReadTokens)*0.5 + float64(en.OutputTokens)*8) / 1e6
		if d := en.CostUSD - want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: ledger cost $%.9f, want $%.9f from its tokens", en.Model, en.CostUSD, want)
		}
		if en.Model != "single" && en.ProviderKey == "" {
			t.Errorf("%s: entry without its provider key", en.Model)
		}
	}
	for m := range in {
		share[m] = float64(read[m]) / float64(in[m])
	}
	t.Logf("cache-read share of prompt tokens: single key %.3f, affinity %.3f, spread %.3f", share["single"], share["affinity"], share["spread"])
	if share["single"] < 0.5 {
		t.Fatalf("single key: cache-read share %.3f, want the history cached (> 0.5)", share["single"])
	}
	if share["affinity"] < 0.9*share["single"] {
		t.Errorf("affinity session: cache-read share %.3f, want at least 90%% of a single key's %.3f", share["affinity"], share["single"])
	}
	if share["spread"] >= share["affinity"]*0.9 {
		t.Errorf("affinity off: cache-read share %.3f, want it well below affinity's %.3f", share["spread"], share["affinity"])
	}
}

// TestKeyPoolLimitsAcrossReplicas: a provider key's rpm is one limit for
// every replica sharing a Redis, as the gateway's own keys' are: with rpm
// 4, two replicas serve 4 requests between them, then answer 429
// provider_keys_exhausted with a Retry-After, without calling the
// upstream.
func TestKeyPoolLimitsAcrossReplicas(t *testing.T) {
	url := redistest.URL(t)
	var b [6]byte
	rand.Read(b[:])
	provider := "pk-" + hex.EncodeToString(b[:]) // a counter of its own in Redis
	u := newKeyedUpstream(t)
	cfg := baseConfig()
	cfg.Redis = url
	cfg.Providers = append(cfg.Providers, config.Provider{Name: provider, Kind: "openai", BaseURL: u.url + "/v1",
		APIKeys: []config.ProviderKey{{Name: "only", Key: "sk-only", RPM: 4}}})
	cfg.Models = append(cfg.Models, config.Model{Name: "pooled", Routes: []config.Route{{Provider: provider, Model: "sim-fast"}}})
	a := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout})
	bb := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout})
	served := 0
	for i := range 8 {
		e := a
		if i%2 == 1 {
			e = bb
		}
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", false, ""))
		switch b, _ := io.ReadAll(resp.Body); resp.StatusCode {
		case 200:
			served++
		case 429:
			if !strings.Contains(string(b), "provider_keys_exhausted") || resp.Header.Get("Retry-After") == "" {
				t.Errorf("request %d: got 429 %s (Retry-After %q), want provider_keys_exhausted with Retry-After", i, b, resp.Header.Get("Retry-After"))
			}
		default:
			t.Errorf("request %d: got %d %s", i, resp.StatusCode, b)
		}
	}
	if served != 4 || u.hitsOf("sk-only") != 4 {
		t.Errorf("rpm 4 over two replicas: served %d, upstream got %d; want 4 and 4", served, u.hitsOf("sk-only"))
	}
}

// TestKeyPoolStateAcrossReplicas: with redis set, a provider key benched
// by a 429 or disabled by a 401 on one replica is out of service on the
// other within a poll (keyshare.Every), which then sends it nothing; a
// reset on either puts the keys back in service on both.
func TestKeyPoolStateAcrossReplicas(t *testing.T) {
	url := redistest.URL(t)
	var b [6]byte
	rand.Read(b[:])
	provider := "pk-" + hex.EncodeToString(b[:]) // a state of its own in Redis
	u := newKeyedUpstream(t)
	cfg := baseConfig()
	cfg.Redis = url
	cfg.AdminKey = "sk-admin"
	cfg.Providers = append(cfg.Providers, config.Provider{Name: provider, Kind: "openai", BaseURL: u.url + "/v1",
		APIKeys: []config.ProviderKey{{Name: "k1", Key: "sk-1"}, {Name: "k2", Key: "sk-2"}, {Name: "k3", Key: "sk-3"}}})
	cfg.Models = append(cfg.Models, config.Model{Name: "pooled", Routes: []config.Route{{Provider: provider, Model: "sim-fast"}}})
	a := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout})
	bb := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, RedisCallTimeout: sharedCallTimeout})
	send := func(e *env, n int) {
		t.Helper()
		for range n {
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("pooled", false, ""))
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("got %d %s, want 200 (another key serves)", resp.StatusCode, body)
			}
		}
	}
	// learnt waits until replica e's /admin/routes says what want says.
	learnt := func(e *env, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			routes := getJSON(t, e.url+"/admin/routes")
			if strings.Contains(routes, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica's /admin/routes after 5 s: %s, want %s", routes, want)
			}
			time.Sleep(keyshare.Every / 2)
		}
	}
	u.set("sk-1", http.StatusTooManyRequests)
	u.set("sk-2", http.StatusUnauthorized)
	for u.hitsOf("sk-1") == 0 || u.hitsOf("sk-2") == 0 { // least-loaded order: each key soon
		send(a, 1)
	}
	learnt(bb, `"name":"k1"`)
	learnt(bb, `"benched_until"`)
	learnt(bb, `"disabled":"the provider answered 401 Unauthorized"`)
	h1, h2, h3 := u.hitsOf("sk-1"), u.hitsOf("sk-2"), u.hitsOf("sk-3")
	send(bb, 10)
	if u.hitsOf("sk-1") != h1 || u.hitsOf("sk-2") != h2 || u.hitsOf("sk-3") != h3+10 {
		t.Errorf("the other replica sent k1 %d, k2 %d, k3 %d requests; want 0, 0, 10 (k1 benched, k2 disabled on the first)",
			u.hitsOf("sk-1")-h1, u.hitsOf("sk-2")-h2, u.hitsOf("sk-3")-h3)
	}
	if got, _ := seriesSum(scrapeFamilies(t, bb.url), "streamgate_provider_key_disabled", map[string]string{"key": "k2"}); got != 1 {
		t.Errorf("the other replica's streamgate_provider_key_disabled{key=k2}: got %v, want 1", got)
	}
	// The operator resets the provider on the other replica: both serve
	// with every key again.
	u.set("sk-1", 0)
	u.set("sk-2", 0)
	resp := do(t, "POST", bb.url+"/admin/routes/"+provider+"/reset", "sk-admin", "")
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("reset: got %d", resp.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		routes := getJSON(t, a.url+"/admin/routes")
		if !strings.Contains(routes, `"disabled"`) && !strings.Contains(routes, `"benched_until"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first replica's /admin/routes 5 s after the reset: %s, want no key benched or disabled", routes)
		}
		time.Sleep(keyshare.Every / 2)
	}
	h1, h2 = u.hitsOf("sk-1"), u.hitsOf("sk-2")
	send(a, 9)
	if u.hitsOf("sk-1") == h1 || u.hitsOf("sk-2") == h2 {
		t.Errorf("after the reset the first replica sent k1 %d and k2 %d of 9 requests; want each back in service", u.hitsOf("sk-1")-h1, u.hitsOf("sk-2")-h2)
	}
}

// TestKeyPoolOfficialSDKs: the current and the previous major of openai-go
// stream through a pooled model with affinity, a session named by the
// SDK's prompt_cache_key parameter: each turn of a session is served by
// the same provider key, the SDKs read the streams whole, and a key
// refused with 429 is invisible to them (served by the next key).
func TestKeyPoolOfficialSDKs(t *testing.T) {
	u := newKeyedUpstream(t)
	e := start(t, pooledConfig(u))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v3 := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0),
		option.WithHeader("X-Sim-TTFT", "1ms"), option.WithHeader("X-Sim-ITL", "1ms"))
	v2 := openai2.NewClient(option2.WithBaseURL(e.url+"/v1/"), option2.WithAPIKey(devKey), option2.WithMaxRetries(0),
		option2.WithHeader("X-Sim-TTFT", "1ms"), option2.WithHeader("X-Sim-ITL", "1ms"))
	turn := func(major, session string) string {
		t.Helper()
		n := len(e.rec.all())
		var content string
		switch major {
		case "v3":
			s := v3.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "pooled", MaxTokens: openai.Int(4),
				PromptCacheKey: openai.String(session), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			acc := openai.ChatCompletionAccumulator{}
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil || len(acc.Choices) == 0 {
				t.Fatalf("openai-go v3, session %s: %v", session, err)
			}
			content = acc.Choices[0].Message.Content
		default:
			s := v2.Chat.Completions.NewStreaming(ctx, openai2.ChatCompletionNewParams{Model: "pooled", MaxTokens: openai2.Int(4),
				PromptCacheKey: openai2.String(session), Messages: []openai2.ChatCompletionMessageParamUnion{openai2.UserMessage("hi")}})
			acc := openai2.ChatCompletionAccumulator{}
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil || len(acc.Choices) == 0 {
				t.Fatalf("openai-go v2, session %s: %v", session, err)
			}
			content = acc.Choices[0].Message.Content
		}
		if content == "" {
			t.Errorf("%s session %s: empty answer", major, session)
		}
		return e.waitEntries(t, n+1)[n].ProviderKey
	}
	for _, major := range []string{"v3", "v2"} {
		keyOf := map[string]string{}
		for i := range 6 {
			keyOf[fmt.Sprint(i)] = turn(major, major+"-conv-"+fmt.Sprint(i))
		}
		for i := range 6 {
			if got := turn(major, major+"-conv-"+fmt.Sprint(i)); got != keyOf[fmt.Sprint(i)] {
				t.Errorf("%s conversation %d: second turn on key %s, first on %s", major, i, got, keyOf[fmt.Sprint(i)])
			}
		}
		// The key of conversation 0 answers 429: its next turn still
		// succeeds for the SDK (another key serves it at once).
		secret := map[string]string{"k1": "sk-one", "k2": "sk-two", "k3": "sk-three"}[keyOf["0"]]
		u.set(secret, http.StatusTooManyRequests)
		if got := turn(major, major+"-conv-0"); got == keyOf["0"] {
			t.Errorf("%s: served by the benched key %s", major, got)
		}
		u.set(secret, 0)
	}
}

// TestKeyPoolAnthropicSDKs: anthropic-sdk-go v2 and the previous major v1
// stream through a model on a pool of simulated Anthropic keys with
// affinity, each conversation named by metadata.user_id (as Claude Code
// names its sessions): every turn of a conversation is served by one key,
// and the conversations spread over the keys.
func TestKeyPoolAnthropicSDKs(t *testing.T) {
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "ant", Kind: "sim", Dialect: "anthropic",
		APIKeys: []config.ProviderKey{{Name: "a1", Key: "sim-ant-1"}, {Name: "a2", Key: "sim-ant-2"}, {Name: "a3", Key: "sim-ant-3"}}})
	cfg.Models = append(cfg.Models, config.Model{Name: "claude-pooled", Affinity: "session",
		Routes: []config.Route{{Provider: "ant", Model: "sim-fast"}}})
	e := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v2 := anthropicClient(e, devKey)
	v1 := anthropic1.NewClient(aoption1.WithBaseURL(e.url), aoption1.WithAPIKey(devKey), aoption1.WithMaxRetries(0),
		aoption1.WithHeader("X-Sim-TTFT", "1ms"), aoption1.WithHeader("X-Sim-ITL", "1ms"))
	turn := func(major, user string) string {
		t.Helper()
		n := len(e.rec.all())
		var text string
		if major == "v2" {
			s := v2.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-pooled", MaxTokens: 4,
				Metadata: anthropic.MetadataParam{UserID: anthropic.String(user)},
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var msg anthropic.Message
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil || len(msg.Content) == 0 {
				t.Fatalf("anthropic-sdk-go v2, user %s: %v", user, err)
			}
			text = msg.Content[0].Text
		} else {
			s := v1.Messages.NewStreaming(ctx, anthropic1.MessageNewParams{Model: "claude-pooled", MaxTokens: 4,
				Metadata: anthropic1.MetadataParam{UserID: anthropic1.String(user)},
				Messages: []anthropic1.MessageParam{anthropic1.NewUserMessage(anthropic1.NewTextBlock("hi"))}})
			var msg anthropic1.Message
			for s.Next() {
				if err := msg.Accumulate(s.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Err(); err != nil || len(msg.Content) == 0 {
				t.Fatalf("anthropic-sdk-go v1, user %s: %v", user, err)
			}
			text = msg.Content[0].Text
		}
		if text == "" {
			t.Errorf("%s user %s: empty answer", major, user)
		}
		return e.waitEntries(t, n+1)[n].ProviderKey
	}
	for _, major := range []string{"v2", "v1"} {
		first, used := map[int]string{}, map[string]bool{}
		for i := range 9 {
			first[i] = turn(major, fmt.Sprintf("user_%s_session_%d", major, i))
			used[first[i]] = true
		}
		for i := range 9 {
			if got := turn(major, fmt.Sprintf("user_%s_session_%d", major, i)); got != first[i] {
				t.Errorf("%s session %d: second turn on key %q, first on %q", major, i, got, first[i])
			}
		}
		if len(used) < 2 {
			t.Errorf("%s: 9 sessions all on %v, want them spread over the keys", major, used)
		}
	}
}
