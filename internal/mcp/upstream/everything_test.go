package upstream

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// everythingEnv names an npm prefix where the reference server is
// installed: npm install --prefix DIR @modelcontextprotocol/server-everything@2026.8.31
const everythingEnv = "STREAMGATE_MCP_EVERYTHING_PREFIX"

// everything returns the reference server's entry point, or skips.
func everything(t *testing.T) (node, entry string) {
	t.Helper()
	prefix := os.Getenv(everythingEnv)
	if prefix == "" {
		t.Skipf("the npm reference server is opt-in: set %s to a prefix where `npm install --prefix DIR @modelcontextprotocol/server-everything@2026.8.31` ran", everythingEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skipf("no node on PATH for the npm reference server: %v", err)
	}
	entry = filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Skipf("%s=%s has no @modelcontextprotocol/server-everything: %v", everythingEnv, prefix, err)
	}
	return node, entry
}

// TestEverythingServer lists and calls the tools of the official reference
// server (@modelcontextprotocol/server-everything) over Streamable HTTP,
// the legacy HTTP+SSE transport and stdio.
func TestEverythingServer(t *testing.T) {
	node, entry := everything(t)
	for _, tc := range []struct{ mode, path string }{{"streamableHttp", "/mcp"}, {"sse", "/sse"}} {
		t.Run(tc.mode, func(t *testing.T) {
			addr := startEverything(t, node, entry, tc.mode)
			exerciseEverything(t, open(t, Config{URL: "http://" + addr + tc.path}))
		})
	}
	t.Run("stdio", func(t *testing.T) {
		exerciseEverything(t, open(t, Config{Command: []string{node, entry, "stdio"}}))
	})
}

// startEverything runs the reference server in an HTTP mode and returns its
// address.
func startEverything(t *testing.T, node, entry, mode string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, entry, mode)
	cmd.Env = append(os.Environ(), fmt.Sprint("PORT=", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := fmt.Sprint("127.0.0.1:", port)
	for deadline := time.Now().Add(20 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference server does not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func exerciseEverything(t *testing.T, s Server) {
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("protocol %s: %s", info.ProtocolVersion, info.Result)
	names := toolNames(t, s)
	for _, want := range []string{"echo", "get-sum", "trigger-long-running-operation"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v: want %s", names, want)
		}
	}
	if got := callTool(t, s, "echo", map[string]string{"message": "hi there"}); !strings.Contains(got, "hi there") {
		t.Errorf("echo: got %q", got)
	}
	if got := callTool(t, s, "get-sum", map[string]int{"a": 2, "b": 3}); !strings.Contains(got, "5") {
		t.Errorf("get-sum: got %q", got)
	}
	req := withToken(toolCall("trigger-long-running-operation", map[string]int{"duration": 1, "steps": 3}), "long")
	progress := 0
	resp, err := s.Call(context.Background(), req, func(ev Event) {
		if ev.Msg.Method == "notifications/progress" && strings.Contains(string(ev.Msg.Params), `"progressToken":"long"`) {
			progress++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	resultText(t, req, resp)
	if progress != 3 {
		t.Errorf("progress notifications: got %d, want 3", progress)
	}
}
