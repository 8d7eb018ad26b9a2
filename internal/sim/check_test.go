package sim_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/provider/gemini"
	"github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/sim"
)

// TestModelsLists: the simulator serves each dialect's models list as its
// provider does, which the gateway's active health check (every adapter's
// provider.Checker) asks for; a stopped simulator fails the check.
func TestModelsLists(t *testing.T) {
	ts := httptest.NewServer(sim.New(sim.Options{Profile: sim.Profile{Name: "m1", Tokens: 3}, Seed: 1}))
	checkers := map[string]provider.Checker{
		"openai":    openai.New(ts.URL+"/v1", "k", openai.Options{}),
		"anthropic": anthropic.New(ts.URL, "k", anthropic.Options{}),
		"gemini":    gemini.New(ts.URL+"/v1beta", "k", gemini.Options{}),
	}
	for name, c := range checkers {
		if err := c.Check(context.Background()); err != nil {
			t.Errorf("%s: Check: %v", name, err)
		}
	}
	for _, tt := range []struct {
		name, path, header, want string
	}{
		{"openai", "/v1/models", "", `"object":"list"`},
		{"anthropic", "/v1/models?limit=1", "2023-06-01", `"type":"model"`},
		{"gemini", "/v1beta/models?pageSize=1", "", `"name":"models/m1"`},
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+tt.path, nil)
		if tt.header != "" {
			req.Header.Set("anthropic-version", tt.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&raw)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), tt.want) {
			t.Errorf("%s: GET %s: got %d %s (%v), want 200 with %s", tt.name, tt.path, resp.StatusCode, raw, err, tt.want)
		}
	}
	ts.Close()
	for name, c := range checkers {
		if err := c.Check(context.Background()); err == nil {
			t.Errorf("%s: Check of a stopped simulator: got nil, want an error", name)
		}
		if ci, ok := c.(interface{ CloseIdleConnections() }); ok {
			ci.CloseIdleConnections()
		}
	}
}
