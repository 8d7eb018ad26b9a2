package collapse_test

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/collapse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buffer is a goroutine-safe log sink.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.b.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func newLogger(out *buffer) (*slog.Logger, *collapse.Handler) {
	text := slog.NewTextHandler(out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	h := collapse.New(text, collapse.Options{})
	return slog.New(h), h
}

// TestCollapse: 1,000 WARN lines that differ only in their request id and
// a number are one line and one summary per window; another WARN line and
// the INFO lines pass; after the window the line is logged again.
func TestCollapse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out buffer
		log, _ := newLogger(&out)
		for i := range 1000 {
			log.Warn("request", "request_id", strconv.Itoa(i), "status", 503,
				"error", "no healthy route: retry after "+strconv.Itoa(i%7)+"s")
			if i%400 == 0 {
				log.Info("request", "request_id", strconv.Itoa(i), "status", 200)
			}
		}
		log.Warn("request", "request_id", "x", "status", 502, "error", "upstream connect failed")
		if got := len(out.lines()); got != 5 {
			t.Fatalf("lines within the window: got %d, want 5 (2 WARN, 3 INFO):\n%s", got, strings.Join(out.lines(), "\n"))
		}
		time.Sleep(collapse.DefaultWindow)
		synctest.Wait()
		lines := out.lines()
		if got := len(lines); got != 6 {
			t.Fatalf("lines after the window: got %d, want 6:\n%s", got, strings.Join(lines, "\n"))
		}
		want := `level=WARN msg="request (repeated 999 times in 10s)" status=503 error="no healthy route: retry after 0s" repeated=999`
		if lines[5] != want {
			t.Fatalf("summary:\ngot  %s\nwant %s", lines[5], want)
		}
		log.Warn("request", "request_id", "y", "status", 503, "error", "no healthy route: retry after 1s")
		if got := out.lines(); len(got) != 7 || !strings.Contains(got[6], "request_id=y") {
			t.Fatalf("the line after its window: got %q, want it logged", got[len(got)-1])
		}
		time.Sleep(collapse.DefaultWindow)
		synctest.Wait()
		if got := len(out.lines()); got != 7 {
			t.Fatalf("a window without repeats ends with no summary: got %d lines, want 7", got)
		}
	})
}

// TestFlush: Flush writes the pending summaries at once.
func TestFlush(t *testing.T) {
	var out buffer
	log, h := newLogger(&out)
	l := log.With("component", "route")
	for range 3 {
		l.Warn("endpoint down", "endpoint", "sim")
	}
	h.Flush()
	lines := out.lines()
	want := []string{
		`level=WARN msg="endpoint down" component=route endpoint=sim`,
		`level=WARN msg="endpoint down (repeated 2 times in 10s)" component=route endpoint=sim repeated=2`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
