package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

// Request is the record of one request. Offsets are from the run's start
// (Intended, Sent) or from the request's send time (everything else).
type Request struct {
	Index     int           `json:"index"`
	Prompt    int           `json:"prompt"` // index in the dataset
	MaxTokens int           `json:"max_tokens,omitempty"`
	Intended  time.Duration `json:"-"` // open loop: intended send offset
	Sent      time.Duration `json:"-"` // actual send offset
	SlotWait  time.Duration `json:"-"` // open loop with a cap: wait for a free slot
	// Entry is the trace entry a replayed request stands for (nil
	// otherwise): its recorded token counts.
	Entry *TraceEntry `json:"-"`
	// Session and Turn place a session run's request (both from 1; 0
	// otherwise).
	Session int `json:"session,omitempty"`
	Turn    int `json:"turn,omitempty"`
	// BodyBytes is the request body's size (a session's turn; over a
	// WebSocket its frame's).
	BodyBytes int `json:"body_bytes,omitempty"`

	Status      int    `json:"status"`
	Kind        string `json:"error_kind,omitempty"` // "" on success
	Err         string `json:"error,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	Incomplete  bool   `json:"incomplete,omitempty"`

	OutputTokens int `json:"output_tokens"`
	InputTokens  int `json:"input_tokens"` // every prompt token, the cache reads and writes included
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens
	// the endpoint reported read from and written to a prompt cache
	// (usage.prompt_tokens_details.cached_tokens and cache_write_tokens).
	CacheReadTokens  int    `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int    `json:"cache_write_tokens,omitempty"`
	TokenSource      string `json:"token_source"`
	Events           int    `json:"events"`
	Done             bool   `json:"done"`
	Finish           bool   `json:"finish"`
	// Arrivals are the content chunks' arrival offsets from the send time.
	Arrivals []time.Duration `json:"-"`
	// Delays are arrival − server stamp for stamped events (nanoseconds).
	Delays []time.Duration `json:"-"`
	End    time.Duration   `json:"-"` // when the stream ended, from send
	// DoneToEnd is the time from the terminal event ("[DONE]") to the end
	// of the body (its rest drained to EOF): what the server still held
	// the stream for after the answer was complete. 0 when the body did
	// not end within DrainClose's bounds or the stream ended otherwise;
	// DoneEnded says it was measured.
	DoneToEnd time.Duration `json:"-"`
	DoneEnded bool          `json:"-"`

	last atomic.Int64 // ns since the runner's base of the last activity, for the idle watchdog
	// collect keeps the answer's text in text (escaped JSON string
	// contents): a session's next turn sends it back.
	collect bool
	text    []byte
}

// OK reports whether the request succeeded.
func (r *Request) OK() bool { return r.Kind == "" && !r.Incomplete }

// TTFT is the first content arrival from send; ok is false without content.
func (r *Request) TTFT() (time.Duration, bool) {
	if len(r.Arrivals) == 0 {
		return 0, false
	}
	return r.Arrivals[0], true
}

// E2E is the last content arrival from send; ok is false without content.
func (r *Request) E2E() (time.Duration, bool) {
	if len(r.Arrivals) == 0 {
		return 0, false
	}
	return r.Arrivals[len(r.Arrivals)-1], true
}

// MaxGap is the largest gap between consecutive content chunks.
func (r *Request) MaxGap() (time.Duration, bool) {
	if len(r.Arrivals) < 2 {
		return 0, false
	}
	var m time.Duration
	for i := 1; i < len(r.Arrivals); i++ {
		m = max(m, r.Arrivals[i]-r.Arrivals[i-1])
	}
	return m, true
}

// Decode span: last − first content.
func (r *Request) decode() time.Duration {
	if len(r.Arrivals) < 2 {
		return 0
	}
	return r.Arrivals[len(r.Arrivals)-1] - r.Arrivals[0]
}

// TPOT is (last − first content) / (output tokens − 1).
func (r *Request) TPOT() (time.Duration, bool) {
	if r.OutputTokens < 2 || len(r.Arrivals) < 2 {
		return 0, false
	}
	return r.decode() / time.Duration(r.OutputTokens-1), true
}

// TPS is output tokens / (last − first content).
func (r *Request) TPS() (float64, bool) {
	d := r.decode()
	if d <= 0 {
		return 0, false
	}
	return float64(r.OutputTokens) / d.Seconds(), true
}

// Error kinds; failed requests are counted under exactly one.
const (
	KindInterrupted = "interrupted"  // cut after HTTP 200: no [DONE], no finish_reason
	KindErrorEvent  = "error_event"  // an error object in the stream
	KindIdle        = "idle_timeout" // no event for IdleTimeout
	KindMalformed   = "malformed"    // a chunk that is not valid JSON, or an over-long line
	KindConnect     = "connect"      // dialing failed
	KindTimeout     = "timeout"      // dial or TLS timeout
	KindTransport   = "transport"    // other failures before a response
	KindHTTP429     = "http_429"
	KindHTTP4xx     = "http_4xx"
	KindHTTP5xx     = "http_5xx"
	KindHTTPOther   = "http_other"
)

// errIdle is the cancel cause of a stream the idle watchdog ended.
var errIdle = errors.New("no event within the idle timeout")

// newTransport returns a transport sized for thousands of concurrent
// streams to one host: no limit on connections, a large idle pool, no
// compression (it would delay chunks), HTTP/1.1 unless http2 is set,
// https:// verified against roots (nil: the system's). A nil dial dials
// TCP.
func newTransport(connectTimeout time.Duration, http2 bool, roots *x509.CertPool, dial func(context.Context, string, string) (net.Conn, error)) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 1 << 16,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: connectTimeout,
		DisableCompression:  true,
		ForceAttemptHTTP2:   http2,
	}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	var p http.Protocols
	p.SetHTTP1(!http2)
	if http2 {
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
	} else {
		// An empty TLSNextProto map keeps TLS connections on HTTP/1.1.
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	tr.Protocols = &p
	return tr
}

// stream reads one response. It is reused across requests by one sender so
// the per-chunk path does not allocate.
type stream struct {
	rd   *sse.Reader
	req  *Request
	t0   time.Time // the run's start, monotonic
	base time.Time // the watchdog's clock origin
	sent time.Time
	api  string // the client API spoken (APIChat when "")
	// ended: the stream's terminal event came (messages: message_stop;
	// responses: response.completed, .incomplete or .failed), which is
	// their "[DONE]".
	ended bool
	// The last counts a Messages stream reported (-1: none yet).
	input, cacheRead, cacheWrite int
}

// setAPI makes the stream read apiName's events: Messages and Responses
// streams end with their terminal event, not "[DONE]".
func (s *stream) setAPI(apiName string) {
	s.api = apiName
	s.rd.NoDone = apiName != "" && apiName != APIChat
}

func newStream() *stream { return &stream{rd: sse.NewReader(nil, 0)} }

// onEvent handles one event that arrived at now; it returns false when the
// stream must stop (error event, malformed chunk).
func (s *stream) onEvent(ev *sse.Event, now time.Time) bool {
	r := s.req
	r.Events++
	r.last.Store(int64(now.Sub(s.base)))
	if ev.Comment != nil {
		if ns, ok := sse.ParseStamp(ev.Comment); ok {
			r.Delays = append(r.Delays, time.Duration(now.UnixNano()-ns))
		}
	}
	if len(ev.Data) == 0 {
		return true // an empty "data:" event: a heartbeat, not a chunk
	}
	if len(ev.Name) == 5 && string(ev.Name) == "error" {
		r.Kind, r.Err, r.Interrupted = KindErrorEvent, "error event: "+clip(ev.Data), true
		return false
	}
	if s.api != "" && s.api != APIChat {
		return s.onDialectEvent(ev, now)
	}
	info, err := api.ScanChunk(ev.Data)
	if err != nil {
		r.Kind, r.Err = KindMalformed, "malformed chunk: "+err.Error()
		return false
	}
	if info.Error {
		r.Kind, r.Err, r.Interrupted = KindErrorEvent, "error event: "+clip(ev.Data), true
		return false
	}
	if info.Content {
		r.Arrivals = append(r.Arrivals, now.Sub(s.sent))
		if r.collect {
			r.text = chatText(r.text, ev.Data)
		}
	}
	if info.Finish {
		r.Finish = true
	}
	if info.HasUsage {
		r.OutputTokens = info.Usage.CompletionTokens
		r.InputTokens = info.Usage.PromptTokens
		r.CacheReadTokens = info.Usage.PromptTokensDetails.CachedTokens
		r.CacheWriteTokens = info.Usage.PromptTokensDetails.CacheWriteTokens
		r.TokenSource = "usage"
	}
	return true
}

// onDialectEvent handles an event of a Messages or Responses stream, as
// onEvent a chat chunk: first token = its first content delta, usage from
// its own usage fields (Messages: message_start's input and cache counts,
// message_delta's output; Responses: the terminal event's), an error
// event or a failed response interrupts.
func (s *stream) onDialectEvent(ev *sse.Event, now time.Time) bool {
	r := s.req
	scan := scanResponses
	if s.api == APIMessages {
		scan = scanMessages
	}
	info, err := scan(ev.Name, ev.Data)
	if err != nil {
		r.Kind, r.Err = KindMalformed, "malformed event: "+err.Error()
		return false
	}
	if info.content {
		r.Arrivals = append(r.Arrivals, now.Sub(s.sent))
		if r.collect {
			r.text = dialectText(s.api, r.text, ev.Name, ev.Data)
		}
	}
	if info.finish {
		r.Finish = true
	}
	if info.terminal {
		s.ended = true
	}
	if info.output >= 0 || info.input >= 0 {
		if s.api == APIMessages {
			// Anthropic's input_tokens leaves out the cache reads and
			// writes; the record's input is every prompt token.
			for _, f := range [...]struct {
				dst *int
				v   int
			}{{&s.input, info.input}, {&s.cacheRead, info.cacheRead}, {&s.cacheWrite, info.cacheWrite}} {
				if f.v >= 0 {
					*f.dst = f.v
				}
			}
			r.InputTokens = max(s.input, 0) + max(s.cacheRead, 0) + max(s.cacheWrite, 0)
			r.CacheReadTokens, r.CacheWriteTokens = max(s.cacheRead, 0), max(s.cacheWrite, 0)
		} else {
			r.InputTokens, r.CacheReadTokens = max(info.input, 0), max(info.cacheRead, 0)
		}
		if info.output >= 0 {
			r.OutputTokens = info.output
			r.TokenSource = "usage"
		}
	}
	if info.failed {
		r.Kind, r.Err, r.Interrupted = KindErrorEvent, "error event: "+clip(ev.Data), true
		return false
	}
	return true
}

func clip(b []byte) string {
	if len(b) > 300 {
		b = b[:300]
	}
	return string(b)
}

// read consumes the body until [DONE], the end, an error or a stop.
func (s *stream) read(body io.Reader) (readErr error) {
	s.rd.Reset(body)
	s.ended, s.input, s.cacheRead, s.cacheWrite = false, -1, -1, -1
	for {
		ev, err := s.rd.Next()
		now := time.Now()
		if err != nil {
			s.req.End = now.Sub(s.sent)
			if err == io.EOF {
				if s.rd.NoDone && !s.ended {
					return sse.ErrTruncated // a bare end before the terminal event
				}
				s.req.Done = true
				return nil
			}
			return err
		}
		if !s.onEvent(ev, now) {
			s.req.End = now.Sub(s.sent)
			return nil
		}
	}
}

// do sends one request and records its outcome in r. parent is the run's
// context: its cancellation marks the request incomplete.
func (s *stream) do(parent context.Context, cl *http.Client, url string, hdr http.Header, body []byte, r *Request, onSend func(cancel context.CancelCauseFunc)) {
	s.req = r
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		r.Kind, r.Err = KindTransport, err.Error()
		return
	}
	for k, v := range hdr {
		hreq.Header[k] = v
	}
	s.sent = time.Now()
	r.Sent = s.sent.Sub(s.t0)
	r.last.Store(int64(s.sent.Sub(s.base)))
	if onSend != nil {
		onSend(cancel)
	}
	resp, err := cl.Do(hreq)
	if err != nil {
		s.fail(ctx, parent, err, false)
		return
	}
	r.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		r.Kind = statusKind(resp.StatusCode)
		r.Err = fmt.Sprintf("http %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return
	}
	err = s.read(resp.Body)
	if r.Done {
		// The rest after "[DONE]" is read so the transport keeps the
		// connection: the next request's TTFT must not pay a new handshake.
		if provider.DrainClose(resp.Body) == nil {
			r.DoneToEnd, r.DoneEnded = time.Since(s.sent)-r.End, true
		}
	} else {
		resp.Body.Close()
	}
	if r.Kind != "" { // stopped by onEvent
		return
	}
	if err != nil && r.Finish && parent.Err() == nil && context.Cause(ctx) == nil {
		// finish_reason seen: the answer is complete even though the stream
		// ended without [DONE] (SPEC: interrupted needs both missing).
		err = nil
	}
	if err != nil {
		s.fail(ctx, parent, err, true)
		return
	}
	if r.TokenSource == "" {
		r.TokenSource = "chunks"
		r.OutputTokens = len(r.Arrivals)
	}
}

// fail classifies err; streaming says a 200 response had begun.
func (s *stream) fail(ctx, parent context.Context, err error, streaming bool) {
	r := s.req
	r.Err = err.Error()
	var lt *sse.LineTooLongError
	var ne net.Error
	switch {
	case parent.Err() != nil:
		r.Incomplete = true
	case errors.Is(context.Cause(ctx), errIdle):
		r.Kind, r.Interrupted, r.Err = KindIdle, true, errIdle.Error()
	case errors.As(err, &lt):
		r.Kind = KindMalformed
	case streaming:
		r.Kind, r.Interrupted = KindInterrupted, true
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		r.Kind = KindTimeout
	case errors.Is(err, syscall.ECONNREFUSED) || isDialError(err):
		r.Kind = KindConnect
	default:
		r.Kind = KindTransport
	}
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func statusKind(code int) string {
	switch {
	case code == 429:
		return KindHTTP429
	case code >= 500 && code < 600:
		return KindHTTP5xx
	case code >= 400 && code < 500:
		return KindHTTP4xx
	}
	return KindHTTPOther + "_" + strconv.Itoa(code)
}
