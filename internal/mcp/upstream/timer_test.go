package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
)

// fakeLink is an in-memory link to a scripted server, so that the idle
// timer runs on synctest's clock.
type fakeLink struct {
	in   chan []byte
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func (f *fakeLink) send(ctx context.Context, msg []byte) error {
	select {
	case f.in <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-f.done:
		return errGone
	}
}

func (f *fakeLink) replyTo(*replyTo) {}

func (f *fakeLink) close() {
	f.once.Do(func() { close(f.done) })
	f.wg.Wait()
}

// gapServer answers initialize, and a tools/call "gaps" with one progress
// notification after each of its arguments' gaps (in minutes), then the
// result.
func gapDialer() dialer {
	return dialer{kind: "fake", dial: func(ctx context.Context, gen int64, deliver func(*jsonrpc.Message), gone func(error)) (link, error) {
		f := &fakeLink{in: make(chan []byte), done: make(chan struct{})}
		f.wg.Go(func() {
			defer gone(errors.New("closed"))
			for {
				var b []byte
				select {
				case b = <-f.in:
				case <-f.done:
					return
				}
				msgs, _, err := jsonrpc.Decode(b, jsonrpc.Limits{})
				if err != nil || !msgs[0].IsRequest() {
					continue
				}
				m := msgs[0]
				switch m.Method {
				case "initialize":
					deliver(&jsonrpc.Message{JSONRPC: "2.0", ID: m.ID, Result: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`)})
				case "tools/call":
					var p struct {
						Arguments struct{ Gaps []int } `json:"arguments"`
						Meta      struct {
							Token json.RawMessage `json:"progressToken"`
						} `json:"_meta"`
					}
					_ = json.Unmarshal(m.Params, &p)
					for i, gap := range p.Arguments.Gaps {
						select {
						case <-time.After(time.Duration(gap) * time.Minute):
						case <-f.done:
							return
						}
						deliver(&jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/progress",
							Params: json.RawMessage(`{"progressToken":` + string(p.Meta.Token) + `,"progress":` + strconv.Itoa(i+1) + `}`)})
					}
					deliver(&jsonrpc.Message{JSONRPC: "2.0", ID: m.ID, Result: json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)})
				}
			}
		})
		return f, nil
	}}
}

// TestIdleTimerExact runs calls on synctest's clock: the idle timeout
// (5 minutes) is restarted by each progress notification, so a call whose
// gaps are all shorter lives as long as it needs, and a gap longer than it
// ends the call exactly the timeout after the last message.
func TestIdleTimerExact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gaps    []int
		elapsed time.Duration
		err     error
	}{
		{"gaps under the timeout", []int{4, 4, 4, 4}, 16 * time.Minute, nil},
		{"a gap over the timeout", []int{4, 6}, 9 * time.Minute, ErrTimeout},
		{"no message at all", []int{6}, 5 * time.Minute, ErrTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMux(newCore(Config{Name: "fake", Timeout: 5 * time.Minute}, slog.New(slog.DiscardHandler)), gapDialer())
				defer m.Close()
				if _, err := m.Info(context.Background()); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				req := toolCall("gaps", map[string][]int{"Gaps": tc.gaps})
				_, err := m.Call(context.Background(), req, nil)
				if !errors.Is(err, tc.err) && !(err == nil && tc.err == nil) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				if got := time.Since(start); got != tc.elapsed {
					t.Fatalf("the call ended after %v, want %v", got, tc.elapsed)
				}
			})
		})
	}
}
