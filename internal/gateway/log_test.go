package gateway_test

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/streamgate/streamgate/internal/gateway"
)

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything logged.
func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the logged lines that contain every one of want.
func (l *logBuffer) lines(want ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, line := range strings.Split(l.b.String(), "\n") {
		for _, w := range want {
			if !strings.Contains(line, w) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// TestLogLevels: what breaks shows at WARN, a fallback at INFO, and a
// non-stream's TTFT is "n/a", not 0s.
func TestLogLevels(t *testing.T) {
	url, _ := hostile(t)
	cfg := hostileConfig(url, "leaky-500", "cut", "unauthorized")
	for _, tt := range []struct {
		name    string
		level   slog.Level
		model   string
		stream  bool
		want    []string // every one in one line
		notWant string   // in no line
	}{
		{"502 at warn", slog.LevelWarn, "h-leaky-500", true, []string{"level=WARN", "msg=request", "status=502", "outcome=upstream_error", "error="}, ""},
		{"error event at warn", slog.LevelWarn, "h-cut", true, []string{"level=WARN", "msg=request", "status=200", "outcome=upstream_error", "without [DONE]"}, ""},
		{"fallback at info", slog.LevelInfo, "fb-unauthorized", true, []string{"level=INFO", "msg=fallback", "reason=upstream_auth"}, "level=WARN"},
		{"served after a fallback is no warning", slog.LevelWarn, "fb-unauthorized", true, nil, "msg="},
		{"ok stream is info", slog.LevelInfo, "m-sim", true, []string{"level=INFO", "msg=request", "status=200", "ttft="}, "ttft=n/a"},
		{"non-stream ttft", slog.LevelInfo, "m-sim", false, []string{"level=INFO", "msg=request", "stream=false", "ttft=n/a"}, "ttft=0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logBuffer{}
			e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1,
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: tt.level}))})
			resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody(tt.model, tt.stream, ""))
			io.ReadAll(resp.Body)
			resp.Body.Close()
			e.waitEntries(t, 1)
			if tt.want != nil && len(logs.lines(tt.want...)) != 1 {
				t.Errorf("want one line with %q; log:\n%s", tt.want, logs.lines())
			}
			if tt.notWant != "" && len(logs.lines(tt.notWant)) != 0 {
				t.Errorf("want no line with %q; log:\n%s", tt.notWant, logs.lines(tt.notWant))
			}
		})
	}
}
