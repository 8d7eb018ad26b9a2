// Package collapse is a slog.Handler wrapper that collapses repeated log
// lines: the first of a kind within a window is logged as it is, the
// others are counted, and when the window ends one line says how many
// there were ("… (repeated N times in 10s)"). A dead upstream under load
// printed 1,643 identical "no healthy route" WARN lines in 23 s (issue 25);
// with it, a handful.
package collapse

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults, used where Options leaves a field zero.
const (
	DefaultWindow  = 10 * time.Second
	DefaultMaxKeys = 256
)

// Options configures a Handler. The zero value collapses WARN and ERROR
// lines over DefaultWindow.
type Options struct {
	// Level is the lowest level collapsed; lines below it pass as they
	// are. 0 (slog.LevelInfo) means slog.LevelWarn: a per-request INFO
	// access line is expected to repeat.
	Level slog.Level
	// Window is how long after a line its repeats are counted instead of
	// logged; 0 means DefaultWindow.
	Window time.Duration
	// Ignore names attributes that differ between lines that are the same
	// (a request id, a duration); nil means DefaultIgnore.
	Ignore []string
	// MaxKeys bounds the kinds of line counted at once; a line of a new
	// kind past it is logged as it is. 0 means DefaultMaxKeys.
	MaxKeys int
}

// DefaultIgnore: the access line's attributes that differ from request to
// request.
var DefaultIgnore = []string{"request_id", "duration", "ttft", "trace_id", "tokens_in", "tokens_out", "key", "attempts"}

// Handler collapses repeated lines of its inner handler. Two lines are the
// same when they have the same level, message and attributes, once the
// ignored attributes are left out and every run of digits is read as one
// number ("retry after 3s" and "retry after 4s", two ports of one dial
// error, are the same line). It is safe for concurrent use.
type Handler struct {
	inner slog.Handler
	st    *state
	scope string // the attributes and groups added by WithAttrs, WithGroup
}

type state struct {
	opts   Options
	ignore map[string]bool
	mu     sync.Mutex
	seen   map[string]*entry
}

// entry is one kind of line in its window.
type entry struct {
	h     slog.Handler // the handler the first line went to
	first slog.Record
	n     int // repeats counted
	timer *time.Timer
}

var _ slog.Handler = (*Handler)(nil)

// New returns a Handler writing to inner.
func New(inner slog.Handler, opts Options) *Handler {
	if opts.Level == slog.LevelInfo {
		opts.Level = slog.LevelWarn
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Ignore == nil {
		opts.Ignore = DefaultIgnore
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	st := &state{opts: opts, ignore: map[string]bool{}, seen: map[string]*entry{}}
	for _, k := range opts.Ignore {
		st.ignore[k] = true
	}
	return &Handler{inner: inner, st: st}
}

// Enabled reports the inner handler's answer.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

// Handle logs r unless it repeats a line of the window.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.st.opts.Level {
		return h.inner.Handle(ctx, r)
	}
	key := h.key(r)
	st := h.st
	st.mu.Lock()
	if e, ok := st.seen[key]; ok {
		e.n++
		st.mu.Unlock()
		return nil
	}
	if len(st.seen) >= st.opts.MaxKeys {
		st.mu.Unlock()
		return h.inner.Handle(ctx, r)
	}
	e := &entry{h: h.inner, first: r.Clone()}
	st.seen[key] = e
	e.timer = time.AfterFunc(st.opts.Window, func() { st.end(key, e) })
	st.mu.Unlock()
	return h.inner.Handle(ctx, r)
}

// end closes the window of e: its summary line when it counted repeats.
func (st *state) end(key string, e *entry) {
	st.mu.Lock()
	if st.seen[key] != e {
		st.mu.Unlock()
		return
	}
	delete(st.seen, key)
	n := e.n
	st.mu.Unlock()
	if n > 0 {
		st.summary(e, n)
	}
}

// summary logs that e's line came n more times in the window.
func (st *state) summary(e *entry, n int) {
	r := slog.NewRecord(time.Now(), e.first.Level,
		e.first.Message+" (repeated "+strconv.Itoa(n)+" times in "+st.opts.Window.String()+")", 0)
	e.first.Attrs(func(a slog.Attr) bool {
		if !st.ignore[a.Key] {
			r.AddAttrs(a)
		}
		return true
	})
	r.AddAttrs(slog.Int("repeated", n))
	e.h.Handle(context.Background(), r)
}

// Flush ends every window at once, logging the summaries of those that
// counted repeats (at shutdown, so that no count is lost).
func (h *Handler) Flush() {
	st := h.st
	st.mu.Lock()
	seen := st.seen
	st.seen = map[string]*entry{}
	st.mu.Unlock()
	for _, e := range seen {
		e.timer.Stop()
		if e.n > 0 {
			st.summary(e, e.n)
		}
	}
}

// key is what two lines that are the same share.
func (h *Handler) key(r slog.Record) string {
	var b strings.Builder
	b.WriteString(h.scope)
	b.WriteString(r.Level.String())
	b.WriteByte(0)
	foldDigits(&b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if h.st.ignore[a.Key] {
			return true
		}
		b.WriteByte(0)
		b.WriteString(a.Key)
		b.WriteByte('=')
		foldDigits(&b, a.Value.Resolve().String())
		return true
	})
	return b.String()
}

// foldDigits writes s with every run of digits as one '#'.
func foldDigits(b *strings.Builder, s string) {
	digits := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			if !digits {
				b.WriteByte('#')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
}

// WithAttrs returns a Handler whose lines carry as; it shares h's windows.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.scope)
	for _, a := range as {
		b.WriteString(a.String())
		b.WriteByte(0)
	}
	return &Handler{inner: h.inner.WithAttrs(as), st: h.st, scope: b.String()}
}

// WithGroup returns a Handler whose attributes go in the group name; it
// shares h's windows.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), st: h.st, scope: h.scope + "[" + name + "]\x00"}
}
