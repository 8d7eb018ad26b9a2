package config

import (
	"strings"
	"testing"
)

// TestMCPConfig: the mcp: block of SPEC "MCP gateway" parses, with ${ENV}
// in a header, and prints redacted.
func TestMCPConfig(t *testing.T) {
	const doc = `providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: m}]}]
mcp:
  session_secret: a-long-enough-session-secret
  servers:
    - {name: docs, url: http://127.0.0.1:3001/mcp, headers: {Authorization: "Bearer ${DOCS_TOKEN}"}, timeout: 10m, tool_prices: {search: 0.002}}
    - {name: fs, command: [npx, -y, "@modelcontextprotocol/server-filesystem", /data], env: {LOG: debug}}
keys:
  - {name: dev, key: sg-dev-0123456789abcdef, mcp_tools: ["docs__*", "fs__read_file"]}
`
	cfg, err := Parse("t.yaml", []byte(doc), envOf(map[string]string{"DOCS_TOKEN": "docs-secret-token"}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.MCP.Servers
	if len(s) != 2 || s[0].Headers["Authorization"] != "Bearer docs-secret-token" || s[0].ToolPrices["search"] != 0.002 ||
		s[0].Timeout.D().Minutes() != 10 || len(s[1].Command) != 4 || s[1].Env["LOG"] != "debug" {
		t.Fatalf("got %+v", s)
	}
	if got := cfg.Keys[0].MCPTools; len(got) != 2 || got[0] != "docs__*" {
		t.Fatalf("mcp_tools: got %q", got)
	}
	out := cfg.String()
	for _, secret := range []string{"docs-secret-token", "a-long-enough-session-secret"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the printed config shows %q:\n%s", secret, out)
		}
	}
	if cfg.MCP.Servers[0].Headers["Authorization"] != "Bearer docs-secret-token" {
		t.Fatal("printing the config changed it")
	}
}

// TestMCPConfigProblems: every problem of the mcp: block at once, each
// naming its field.
func TestMCPConfigProblems(t *testing.T) {
	c := validConfig()
	c.MCP = MCP{SessionSecret: "short", SessionTTL: Duration(1e9), Servers: []MCPServer{
		{Name: "docs", URL: "http://127.0.0.1:3001/mcp", Headers: map[string]string{"Mcp-Session-Id": "x", "Bad Name": "y"}, ToolPrices: map[string]float64{"search": -1}},
		{Name: "a__b", URL: "ftp://x", Command: []string{"x"}},
		{Name: "fs", Command: []string{""}, Headers: map[string]string{"A": "b"}, Timeout: -1},
		{Name: "docs", URL: "http://x", Env: map[string]string{"A": "b"}},
		{Name: "_x"},
	}}
	c.Keys[0].MCPTools = []string{"docs__*", "", "nope__x", "a b", "*search"}
	want := []string{
		`mcp.servers[0].headers: "Bad Name" is not a valid HTTP header name`,
		`mcp.servers[0].headers: "Mcp-Session-Id" is the protocol's own header and cannot be set`,
		`mcp.servers[0].tool_prices.search: must be a finite number ≥ 0 (USD per call), got -1`,
		`mcp.servers[1].name: "a__b" has "__", which separates a server's name from its tools' (server__tool)`,
		`mcp.servers[1]: both url and command are set: a server is one or the other`,
		`mcp.servers[2].command[0]: the program is empty`,
		`mcp.servers[2].headers: only an HTTP server (url) gets headers: they would not be used`,
		`mcp.servers[2].timeout: must not be negative, got -1ns`,
		`mcp.servers[3].name: duplicate MCP server name "docs" (first at mcp.servers[0])`,
		`mcp.servers[3].env: only a stdio server (command) has an environment: it would not be used`,
		`mcp.servers[4].name: "_x" must begin and end with a letter or a digit`,
		`mcp.servers[4]: one of url (an HTTP server) and command (a stdio server) is required`,
		`mcp.session_secret: must be at least 16 characters (it seals the session ids of every replica)`,
		`mcp.session_ttl: must be at least 1m (0s: the default, 24h0m0s), got 1s`,
		`keys[0].mcp_tools[1]: an empty glob allows nothing`,
		`keys[0].mcp_tools[2]: "nope__x" names MCP server "nope", which is not configured`,
		`keys[0].mcp_tools[3]: "a b" has a space or control character`,
	}
	err := c.Validate()
	if err == nil {
		t.Fatal("got nil, want every problem")
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	c.MCP = MCP{}
	c.Keys[0].MCPTools = []string{"docs__*"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "no MCP server is configured") {
		t.Errorf("mcp_tools without servers: got %v", err)
	}
}

func TestMCPConfigShape(t *testing.T) {
	const base = "providers: [{name: sim, kind: sim}]\nmodels: [{name: m, routes: [{provider: sim, model: m}]}]\n"
	_, err := Parse("t.yaml", []byte(base+"mcp: {servers: [{name: d, url: 'http://x', tool_prices: {a: cheap}, headers: [x], bogus: 1}]}\n"), envOf(nil))
	if err == nil {
		t.Fatal("got nil")
	}
	for _, want := range []string{`mcp.servers[0].tool_prices.a`, `mcp.servers[0].headers: want a mapping`, `unknown field "bogus"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q named", err, want)
		}
	}
}
