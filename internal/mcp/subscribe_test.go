package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/streamgate/streamgate/internal/mcp/upstream"
)

// TestLegacySubscribeOnModernServer: a 2025-11-25 client subscribes to a
// resource of a server the gateway reaches in 2026-07-28, which has no
// resources/subscribe (its clients subscribe with subscriptions/listen):
// the gateway acknowledges it, as the same server does when a 2025-11-25
// client reaches it directly, on /mcp and on /mcp/{server}, instead of
// passing on a "method not found" the client never caused.
func TestLegacySubscribeOnModernServer(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "docs-server", Version: "1.0.0"}, &sdk.ServerOptions{
		SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&sdk.Resource{Name: "readme", URI: "file:///readme.md", MIMEType: "text/plain"}, func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "read me"}}}, nil
	})
	up := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	srv, err := upstream.Open(upstream.Config{Name: "docs", URL: up.URL}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if info, err := srv.Info(ctx); err != nil || info.ProtocolVersion != upstream.Version2026 {
		t.Fatalf("the upstream speaks %q (%v), want %s: the test needs a modern server", info.ProtocolVersion, err, upstream.Version2026)
	}
	gov := &testGovernor{keys: map[string]*Caller{"sk-dev": {Key: "dev"}}}
	gw, err := New(Options{Servers: []ServerSpec{{Name: "docs", Server: srv}}, Governor: gov, Sealer: testSealer(t),
		KeepAlive: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(gw)
	t.Cleanup(func() { front.Close(); gw.Close() })

	for _, c := range []struct{ path, uri string }{{"/mcp", PrefixedURI("docs", "file:///readme.md")}, {"/mcp/docs", "file:///readme.md"}} {
		cs := connect(t, front.URL+c.path, "sk-dev", "2025-11-25", nil)
		if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: c.uri}); err != nil {
			t.Errorf("%s: subscribe %s: %v", c.path, c.uri, err)
		}
		if err := cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: c.uri}); err != nil {
			t.Errorf("%s: unsubscribe %s: %v", c.path, c.uri, err)
		}
	}
	// An unknown server's resource is still the client's error.
	cs := connect(t, front.URL+"/mcp", "sk-dev", "2025-11-25", nil)
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: PrefixedURI("nope", "file:///x")}); err == nil {
		t.Error("subscribe to a resource of no server: no error")
	}
}
