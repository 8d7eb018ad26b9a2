package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/provider"
)

// BenchmarkPlacement is the per-request cost of affinity and key pools:
// the session identity of a request (its X-Session-Id header, or the
// fingerprint of an agent prompt's prefix), the placement over 3 routes ×
// 2 provider keys, and the lease of the placed key and its release.
func BenchmarkPlacement(b *testing.B) {
	cfg := &config.Config{Timeouts: config.Timeouts{}}
	for i := range 3 {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: fmt.Sprintf("p%d", i), Kind: "openai", BaseURL: "http://127.0.0.1:1/v1",
			APIKeys: []config.ProviderKey{{Name: "a", Key: fmt.Sprintf("sk-%da", i)}, {Name: "b", Key: fmt.Sprintf("sk-%db", i)}}})
	}
	m := config.Model{Name: "m", Affinity: "session"}
	for i := range 3 {
		m.Routes = append(m.Routes, config.Route{Provider: fmt.Sprintf("p%d", i), Model: "x"})
	}
	cfg.Models = []config.Model{m}
	cfg.SetDefaults()
	g, err := New(Options{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rs := g.cur().routes["m"]
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You are a coding agent. ", 40) +
		`"},{"role":"user","content":"fix the bug in main.go"},{"role":"assistant","content":"done"},{"role":"user","content":"now the tests"}]}`)
	for _, tc := range []struct {
		name   string
		header string
	}{{"header", "session-42"}, {"prefix", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
			if tc.header != "" {
				r.Header.Set("X-Session-Id", tc.header)
			}
			req := &provider.Request{Body: body}
			c := &call{}
			p := &plan{c: c, rs: rs}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c.session = sessionOf(r, req, rs.aff.mode)
				p.order = rs.set.Order(p.buf[:0])
				p.pinKey, p.affinity = -1, false
				rs.aff.place(p, c.session.Key)
				rt := p.order[0]
				if _, err := p.lease(ctx, rs.target(rt)); err != nil || !p.affinity {
					b.Fatal(err)
				}
				slot := rs.aff.slot(rs.index(rt), p.held.Index())
				rs.aff.set.Begin(slot)
				rs.aff.set.End(slot)
				p.held.Release(0)
			}
		})
	}
}
