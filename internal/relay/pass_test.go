package relay_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// scriptStream is an upstream stream of events with the info each carries;
// err ends it (nil: io.EOF). As a passed stream it is in dialect "x".
type scriptStream struct {
	evs   []sse.Event
	infos []api.ChunkInfo
	err   error
	i     int
}

func (s *scriptStream) Next() (*sse.Event, error) {
	if s.i == len(s.evs) {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	s.i++
	return &s.evs[s.i-1], nil
}

func (s *scriptStream) Close() error { return nil }

func (s *scriptStream) ChunkInfo() api.ChunkInfo { return s.infos[s.i-1] }

type passed struct{ scriptStream }

func (*passed) Dialect() string { return "x" }

var _ provider.Passthrough = (*passed)(nil)

// xEncoder is a client dialect "x": a translated event is written as
// "event: x" with the OpenAI chunk's data prefixed, the end is "event:
// end"; its passthrough writes events as they came.
type xEncoder struct{ pass bool }

func (xEncoder) Reset() {}
func (e xEncoder) Event(w *sse.Writer, ev *sse.Event, _ *api.ChunkInfo) error {
	if e.pass {
		return w.Queue(ev.Name, ev.Data)
	}
	return w.Queue([]byte("x"), append([]byte("translated "), ev.Data...))
}
func (e xEncoder) Done(w *sse.Writer) error {
	if e.pass {
		return w.Flush()
	}
	return w.Event([]byte("end"), []byte("{}"))
}
func (xEncoder) Error(w *sse.Writer, body []byte) error { return w.Event([]byte("error"), body) }
func (xEncoder) KeepAlive(w *sse.Writer) error          { return w.Comment([]byte("ka")) }
func (xEncoder) ErrorBody(_ int, body []byte) []byte    { return body }
func (xEncoder) Pass(dialect string) relay.Encoder {
	if dialect != "x" {
		return nil
	}
	return xEncoder{pass: true}
}

// TestPassthroughAttempt: a stream in the client's dialect is written as
// it came (event names and data, a usage-only event the client did not
// ask for included) and measured from its ChunkInfo, its events before
// the first content held; one that fails before content leaves nothing
// behind, and the next attempt's translated stream is the client
// encoder's again; a client encoder that does not speak the stream's
// dialect refuses it.
func TestPassthroughAttempt(t *testing.T) {
	content, none := api.ChunkInfo{Content: true}, api.ChunkInfo{}
	usage := api.ChunkInfo{HasUsage: true, Usage: api.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}}
	good := func() *passed {
		return &passed{scriptStream{
			evs: []sse.Event{{Name: []byte("start"), Data: []byte(`{"s":1}`)}, {Name: []byte("delta"), Data: []byte(`{"d":"a"}`)},
				{Name: []byte("delta"), Data: []byte(`{"d":"b"}`)}, {Name: []byte("usage"), Data: []byte(`{"u":7}`)}, {Name: []byte("stop"), Data: []byte(`{}`)}},
			infos: []api.ChunkInfo{none, content, content, usage, none},
		}}
	}
	const want = "event: start\ndata: {\"s\":1}\n\nevent: delta\ndata: {\"d\":\"a\"}\n\nevent: delta\ndata: {\"d\":\"b\"}\n\n" +
		"event: usage\ndata: {\"u\":7}\n\nevent: stop\ndata: {}\n\n"
	failing := &passed{scriptStream{evs: []sse.Event{{Name: []byte("start"), Data: []byte(`{"s":1}`)}}, infos: []api.ChunkInfo{none},
		err: &provider.Error{Status: 529, Retryable: true}}}
	translated := &scriptStream{evs: []sse.Event{{Data: []byte(content1)}}, infos: []api.ChunkInfo{content}}

	for _, tt := range []struct {
		name    string
		enc     relay.Encoder
		streams []provider.Stream
		want    string
		err     bool
	}{
		{"passed", xEncoder{}, []provider.Stream{good()}, want, false},
		{"passed after a translated attempt failed", xEncoder{}, []provider.Stream{&scriptStream{evs: []sse.Event{{Data: []byte(role())}}, infos: []api.ChunkInfo{none}, err: errors.New("cut")}, good()}, want, false},
		{"translated after a passed attempt failed", xEncoder{}, []provider.Stream{failing, translated},
			"event: x\ndata: translated " + content1 + "\n\nevent: end\ndata: {}\n\n", false},
		{"a client of another dialect", nil, []provider.Stream{good()}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			results := make(chan result, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sess := relay.NewSession(w, relay.Options{Encoder: tt.enc, FirstToken: 5 * time.Second, Idle: 5 * time.Second})
				defer sess.Close()
				var err error
				for _, st := range tt.streams {
					err = sess.Attempt(r.Context(), nil, func(context.Context) (provider.Stream, error) { return st, nil })
					if err == nil || sess.ContentSent() {
						break
					}
				}
				if err != nil {
					sess.Fail(http.StatusBadGateway, []byte(`{"error":{"message":"failed"}}`))
				}
				results <- result{err: err, stats: sess.Stats(), sent: sess.ContentSent()}
			}))
			defer srv.Close()
			resp := post(t, srv.URL)
			b, _ := io.ReadAll(resp.Body)
			res := wait(t, results)
			if tt.err {
				if res.err == nil || resp.StatusCode != http.StatusBadGateway {
					t.Errorf("got %d %q, %v; want 502 and an error", resp.StatusCode, b, res.err)
				}
				return
			}
			if res.err != nil || string(b) != tt.want {
				t.Fatalf("got %q, %v\nwant %q", b, res.err, tt.want)
			}
			if strings.HasPrefix(tt.want, "event: start") && (res.stats.ContentChunks != 2 || !res.stats.HasUsage || res.stats.Usage.CompletionTokens != 2 || res.stats.TTFT <= 0) {
				t.Errorf("got stats %+v, want 2 content chunks, the usage and a TTFT", res.stats)
			}
		})
	}
}

var content1 = content("hi")
