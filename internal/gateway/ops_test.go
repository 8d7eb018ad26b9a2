package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/usage"
)

// TestTrustedProxiesThrottlePerClient: behind a trusted proxy (the test's
// loopback peer), wrong admin keys are counted per X-Forwarded-For client,
// so five from one client do not lock out another; from an untrusted peer
// the header is ignored and every client is the peer.
func TestTrustedProxiesThrottlePerClient(t *testing.T) {
	for _, tc := range []struct {
		name        string
		trusted     []string
		otherLocked bool
	}{
		{"trusted proxy", []string{"127.0.0.0/8", "::1"}, false},
		{"untrusted peer", []string{"10.0.0.0/8"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.AdminKey = "sk-admin"
			cfg.TrustedProxies = tc.trusted
			e := start(t, cfg)
			xff := func(client string) []string {
				// The client's own (spoofed) entry first, then what nginx appended.
				return []string{"X-Forwarded-For", "198.51.100.1, " + client}
			}
			for range 6 {
				do(t, "GET", e.url+"/admin/routes", "wrong", "", xff("203.0.113.7")...)
			}
			if resp := do(t, "GET", e.url+"/admin/routes", "sk-admin", "", xff("203.0.113.7")...); resp.StatusCode != http.StatusTooManyRequests {
				t.Errorf("the guessing client with the right key: got %d, want 429 (still throttled)", resp.StatusCode)
			}
			resp := do(t, "GET", e.url+"/admin/routes", "sk-admin", "", xff("203.0.113.8")...)
			if locked := resp.StatusCode == http.StatusTooManyRequests; locked != tc.otherLocked {
				t.Errorf("another client with the right key: got %d, want locked out %v", resp.StatusCode, tc.otherLocked)
			}
		})
	}
}

// fakeLedger is a usage recorder that buffers: Stats and MaxPending as
// usage.Writer has them.
type fakeLedger struct {
	mu      sync.Mutex
	pending uint64
	max     int
}

func (f *fakeLedger) Record(usage.Entry) { f.mu.Lock(); f.pending++; f.mu.Unlock() }
func (f *fakeLedger) Stats() usage.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return usage.Stats{Pending: f.pending}
}
func (f *fakeLedger) MaxPending() int { return f.max }

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestReadyzDegradedNotDown: with the usage store unreachable a replica
// whose ledger buffers is degraded, not down: /readyz answers 200 with
// status "degraded", the reason and the replica's name, one WARN, and
// streamgate_ready_degraded 1, and it keeps serving; with the buffer full
// it answers 503 not_ready. The store back, 200 ready and the metric 0.
func TestReadyzDegradedNotDown(t *testing.T) {
	var (
		mu      sync.Mutex
		pingErr = errors.New("dial tcp 10.0.0.5:5432: connection refused")
	)
	led := &fakeLedger{max: 3}
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	cfg := baseConfig()
	cfg.Replica = "gw-2"
	gw, err := gateway.New(gateway.Options{Config: cfg, Recorder: led, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Ping: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			return pingErr
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	ready := func() (int, map[string]any, http.Header) {
		resp := do(t, "GET", srv.URL+"/readyz", "", "")
		b, _ := io.ReadAll(resp.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("/readyz: %s: %v", b, err)
		}
		return resp.StatusCode, body, resp.Header
	}
	gauge := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "streamgate_ready_degraded" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no streamgate_ready_degraded")
		return 0
	}

	for range 2 {
		code, body, h := ready()
		if code != http.StatusOK || body["status"] != "degraded" || body["replica"] != "gw-2" || body["ledger"] != "degraded" ||
			!strings.Contains(body["reason"].(string), "connection refused") || h.Get(gateway.HeaderReplica) != "gw-2" {
			t.Errorf("store down, buffer has room: got %d %v (replica header %q), want 200 degraded naming the reason and gw-2", code, body, h.Get(gateway.HeaderReplica))
		}
	}
	if g := gauge(); g != 1 {
		t.Errorf("streamgate_ready_degraded: got %v, want 1", g)
	}
	if n := strings.Count(logs.String(), "readiness: degraded"); n != 1 {
		t.Errorf("got %d WARN lines for two probes, want 1:\n%s", n, logs)
	}
	if resp := do(t, "POST", srv.URL+"/v1/chat/completions", devKey, chatBody("m-sim", false, "")); resp.StatusCode != http.StatusOK {
		t.Errorf("a request while degraded: got %d, want 200", resp.StatusCode)
	}

	led.mu.Lock()
	led.pending = 3
	led.mu.Unlock()
	if code, body, _ := ready(); code != http.StatusServiceUnavailable || body["status"] != "not_ready" || !strings.Contains(body["reason"].(string), "buffer is full") {
		t.Errorf("store down, buffer full: got %d %v, want 503 not_ready", code, body)
	}

	mu.Lock()
	pingErr = nil
	mu.Unlock()
	if code, body, _ := ready(); code != http.StatusOK || body["status"] != "ready" || body["ledger"] != "ok" {
		t.Errorf("store back: got %d %v, want 200 ready", code, body)
	}
	if g := gauge(); g != 0 {
		t.Errorf("streamgate_ready_degraded after recovery: got %v, want 0", g)
	}
}
