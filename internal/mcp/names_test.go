package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

func TestPrefixedName(t *testing.T) {
	long := strings.Repeat("x", 70)
	cases := []struct{ server, tool, want string }{
		{"docs", "search", "docs__search"},
		{"docs", "read-file_2", "docs__read-file_2"},
	}
	for _, c := range cases {
		if got := PrefixedName(c.server, c.tool); got != c.want {
			t.Errorf("PrefixedName(%q, %q): got %q, want %q", c.server, c.tool, got, c.want)
		}
	}
	seen := map[string]string{}
	for _, tool := range []string{long, long + "y", "a.b", "a_b.", "ünï", "a b", strings.Repeat("z", 58)} {
		got := PrefixedName("docs", tool)
		if !ValidName(got) || len(got) > MaxName {
			t.Errorf("PrefixedName(docs, %q) = %q: not a valid provider function name of at most 64", tool, got)
		}
		if again := PrefixedName("docs", tool); again != got {
			t.Errorf("PrefixedName(docs, %q): %q then %q", tool, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%q and %q both show as %q", prev, tool, got)
		}
		seen[got] = tool
	}
	// Fixed forever: replicas and releases show the same names.
	if got, want := PrefixedName("docs", long), "docs__"+strings.Repeat("x", 49)+"_b384a454"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if s, rest, ok := SplitName("my-docs__a__b"); !ok || s != "my-docs" || rest != "a__b" {
		t.Errorf("SplitName: %q %q %v", s, rest, ok)
	}
	if s, u, ok := SplitURI(PrefixedURI("docs", "file:///a?b#c")); !ok || s != "docs" || u != "file:///a?b#c" {
		t.Errorf("SplitURI: %q %q %v", s, u, ok)
	}
}

func TestMatchGlob(t *testing.T) {
	for _, c := range []struct {
		g, name string
		want    bool
	}{
		{"docs__*", "docs__search", true}, {"docs__*", "fs__read", false}, {"*search", "docs__search", true},
		{"fs__read_file", "fs__read_file", true}, {"fs__read_file", "fs__read_files", false}, {"a*b*c", "abc", true}, {"a*a", "a", false},
	} {
		if got := MatchGlob(c.g, c.name); got != c.want {
			t.Errorf("MatchGlob(%q, %q): got %v", c.g, c.name, got)
		}
	}
	_, servers := CallerAllow([]string{"docs__*", "fs__read_file"})
	if !servers("docs") || !servers("fs") || servers("web") {
		t.Error("CallerAllow's servers: want docs and fs only")
	}
	if _, servers := CallerAllow([]string{"*search"}); !servers("web") {
		t.Error("a glob starting with '*' may match any server")
	}
}

// stubServer answers tools/call with a fixed result (a 2026-07-28 server's
// input_required) and records the request it got.
type stubServer struct {
	result json.RawMessage
	got    []*jsonrpc.Message
}

func (s *stubServer) Call(_ context.Context, req *jsonrpc.Message, _ func(Event)) (*jsonrpc.Message, error) {
	s.got = append(s.got, req)
	if req.Method == "tools/list" {
		return &jsonrpc.Message{JSONRPC: "2.0", ID: req.ID, Result: json.RawMessage(`{"tools":[{"name":"ask","inputSchema":{"type":"object"}}]}`)}, nil
	}
	return &jsonrpc.Message{JSONRPC: "2.0", ID: req.ID, Result: s.result}, nil
}
func (s *stubServer) Notify(context.Context, *jsonrpc.Message) error        { return nil }
func (s *stubServer) Reply(context.Context, string, *jsonrpc.Message) error { return nil }
func (s *stubServer) Listen(ctx context.Context, _ func(Event)) error {
	<-ctx.Done()
	return nil
}
func (s *stubServer) Info(context.Context) (Info, error) {
	return Info{ProtocolVersion: versionModern, Result: json.RawMessage(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`)}, nil
}
func (s *stubServer) Close() error { return nil }

// TestInputRequiredPassesThrough: a 2026-07-28 server's input_required
// result reaches the client byte for byte, and the client's retry (its
// inputResponses and requestState) reaches the server untouched.
func TestInputRequiredPassesThrough(t *testing.T) {
	const res = `{"resultType":"input_required","inputRequests":{"login":{"method":"elicitation/create","params":{"mode":"form","message":"name?","requestedSchema":{"type":"object"}}}},"requestState":"opaque+/=state"}`
	stub := &stubServer{result: json.RawMessage(res)}
	gov := &testGovernor{keys: map[string]*Caller{"sk-dev": {Key: "dev"}}}
	gw, err := New(Options{Servers: []ServerSpec{{Name: "s", Server: stub}}, Governor: gov, Sealer: testSealer(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer func() { srv.Close(); gw.Close() }()
	h := map[string]string{"MCP-Protocol-Version": versionModern, "Mcp-Method": "tools/call", "Mcp-Name": "s__ask"}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	r := post(t, srv.URL+"/mcp", "sk-dev", h, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s__ask",`+meta+`}}`)
	if r.status != 200 || !strings.Contains(r.body, `"result":`+res) {
		t.Fatalf("got %d %s, want the result as the server sent it", r.status, r.body)
	}
	retry := `"inputResponses":{"login":{"action":"accept","content":{"name":"ada"}}},"requestState":"opaque+/=state"`
	r = post(t, srv.URL+"/mcp", "sk-dev", h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"s__ask",`+retry+`,`+meta+`}}`)
	if r.status != 200 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	last := stub.got[len(stub.got)-1]
	if !strings.Contains(string(last.Params), retry) || !strings.Contains(string(last.Params), `"name":"ask"`) {
		t.Fatalf("the server got %s", last.Params)
	}
	if strings.Contains(string(last.Params), "io.modelcontextprotocol/protocolVersion") {
		t.Fatalf("the client's protocol version reached the server: %s", last.Params)
	}
}
