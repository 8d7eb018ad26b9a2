package mcp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/streamgate/streamgate/internal/mcp/upstream"
)

// recorder is a Go SDK server over loopback HTTP that records what reaches
// it: every request's headers and the tools/call requests.
type recorder struct {
	srv     *httptest.Server
	mu      sync.Mutex
	headers []http.Header
	calls   int
}

func newRecorder(t testing.TB, s *sdk.Server) *recorder {
	t.Helper()
	rec := &recorder{}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec.mu.Lock()
		rec.headers = append(rec.headers, r.Header.Clone())
		if strings.Contains(string(body), `"method":"tools/call"`) {
			rec.calls++
		}
		rec.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		rec.srv.Close()
		// A session the gateway's client opened while the test ended (its
		// listener connecting as Close came) is ended here, not by a DELETE.
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	return rec
}

// open is the gateway's client of the recorder (package upstream), with
// the configured headers h.
func (rec *recorder) open(t testing.TB, name string, h map[string]string) Server {
	t.Helper()
	s, err := upstream.Open(upstream.Config{Name: name, URL: rec.srv.URL, Headers: h}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (rec *recorder) toolCalls() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.calls
}

func (rec *recorder) seen() []http.Header {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]http.Header(nil), rec.headers...)
}

// testGovernor authenticates the keys it holds (Bearer or x-api-key) and
// keeps the ledger rows it is given.
type testGovernor struct {
	keys map[string]*Caller // by secret
	mu   sync.Mutex
	rows []ToolCall
	// refuse, when set, refuses every call (a budget spent).
	refuse error
	// discard keeps no rows (benchmarks).
	discard bool
}

func (g *testGovernor) Authenticate(r *http.Request) (*Caller, error) {
	secret := r.Header.Get("X-Api-Key")
	if h := r.Header.Get("Authorization"); h != "" {
		secret = h[len("Bearer "):]
	}
	c, ok := g.keys[secret]
	if !ok {
		return nil, errors.New("invalid API key")
	}
	cc := *c
	return &cc, nil
}

func (g *testGovernor) Admit(_ context.Context, _ *Caller, _, _ string, _ float64) (func(float64), error) {
	if g.refuse != nil {
		return nil, g.refuse
	}
	return func(float64) {}, nil
}

func (g *testGovernor) Record(c ToolCall) {
	if g.discard {
		return
	}
	g.mu.Lock()
	g.rows = append(g.rows, c)
	g.mu.Unlock()
}

func (g *testGovernor) ledger() []ToolCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]ToolCall(nil), g.rows...)
}
