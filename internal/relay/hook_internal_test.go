package relay

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// hookStream is a stream that ends at once and keeps the read hook the
// relay gave it.
type hookStream struct{ hook sse.ReadHook }

func (s *hookStream) Next() (*sse.Event, error) { return nil, io.EOF }
func (s *hookStream) Close() error              { return nil }
func (s *hookStream) BeforeRead(h sse.ReadHook) { s.hook = h }

// TestReadHookIsSession: the hook a stream is given is the Session itself
// (its flushHook view), not a method value: a func value would be one more
// object, on a cache line of its own, that every upstream read of every
// stream reaches through.
func TestReadHookIsSession(t *testing.T) {
	s := NewSession(httptest.NewRecorder(), Options{})
	st := &hookStream{}
	_ = s.Attempt(context.Background(), nil, func(context.Context) (provider.Stream, error) { return st, nil })
	h, ok := st.hook.(*flushHook)
	if !ok || (*Session)(h) != s {
		t.Fatalf("hook is %T %p, want the Session %p as *flushHook", st.hook, st.hook, s)
	}
}
