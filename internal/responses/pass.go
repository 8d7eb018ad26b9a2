package responses

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// Pass implements relay.Passer: the stream of an upstream that speaks the
// Responses API itself (provider.DialectResponses) reaches the client as
// it came, event for event and byte for byte: the upstream's ids,
// sequence numbers, built-in tool items and events to come. Its own
// terminal event ends it. A failure after the commit point that the
// upstream did not end itself is one response.failed: the upstream's
// response (as response.created gave it) with status failed, the error,
// the output items done so far and the gateway's estimate of the usage,
// numbered after the last event passed; a keep-alive is an SSE comment.
func (e *Encoder) Pass(dialect string) relay.Encoder {
	if dialect != provider.DialectResponses {
		return nil
	}
	if e.pass == nil {
		e.pass = &passEncoder{e: e}
	}
	return e.pass
}

var _ relay.Passer = (*Encoder)(nil)

// passEncoder is the Encoder of a passed-through stream (see Encoder.Pass).
type passEncoder struct {
	e          *Encoder // the client's translating encoder, for a failure the client saw nothing of
	seq        int64    // the sequence number after the last event passed
	created    []byte   // response.created's response object, when hasCreated
	hasCreated bool
	items      []byte // the output items done so far, joined by commas
	chunks     int    // content events passed
	ended      bool   // the upstream's terminal event was passed
	last       *sse.Writer
}

func (p *passEncoder) Reset() {
	*p = passEncoder{e: p.e, created: p.created[:0], items: p.items[:0]}
}

var (
	seqKey      = []byte(`"sequence_number":`)
	createdName = []byte("response.created")
	itemDone    = []byte("response.output_item.done")
)

func (p *passEncoder) Event(w *sse.Writer, ev *sse.Event, info *api.ChunkInfo) error {
	p.last = w
	if i := bytes.Index(ev.Data, seqKey); i >= 0 {
		if n, ok := leadingInt(ev.Data[i+len(seqKey):]); ok {
			p.seq = n
		}
	}
	p.seq++
	switch {
	case info.Content:
		p.chunks++
	case info.Finish:
		p.ended = true
	default:
		p.keep(ev)
	}
	return w.Queue(ev.Name, ev.Data)
}

// keep copies what a failure's response.failed needs of an event that
// carries no content: response.created's response, a done output item.
func (p *passEncoder) keep(ev *sse.Event) {
	name := ev.Name
	var typ string
	var obj, item json.RawMessage
	api.EachMember(ev.Data, func(key, _, value []byte) error {
		switch string(key) {
		case "type":
			json.Unmarshal(value, &typ)
		case "response":
			obj = value
		case "item":
			item = value
		}
		return nil
	})
	if len(name) == 0 {
		name = []byte(typ)
	}
	switch {
	case bytes.Equal(name, createdName) && len(obj) > 0:
		p.created, p.hasCreated = append(p.created[:0], obj...), true
	case bytes.Equal(name, itemDone) && len(item) > 0:
		if len(p.items) > 0 {
			p.items = append(p.items, ',')
		}
		p.items = append(p.items, item...)
	}
}

// leadingInt reads the non-negative integer b begins with, spaces first.
func leadingInt(b []byte) (int64, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	var n int64
	i := 0
	for ; i < len(b) && i < 18 && b[i] >= '0' && b[i] <= '9'; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	return n, i > 0
}

// Done flushes: the upstream's terminal event was the stream's last.
func (p *passEncoder) Done(w *sse.Writer) error { return w.Flush() }

// Error ends a stream the upstream did not end: nothing when its terminal
// event was passed (response.failed, relayed with its usage); the
// translating encoder's response.failed when the client saw none of the
// upstream's response; else response.failed on the upstream's response.
func (p *passEncoder) Error(w *sse.Writer, body []byte) error {
	if p.ended {
		return w.Flush()
	}
	if p.last != w || !p.hasCreated {
		seq := int64(0)
		if p.last == w {
			seq = p.seq // events without response.created reached the client
		}
		e := p.e
		e.Reset()
		e.seq = seq
		return e.Error(w, body)
	}
	u := usage{out: p.chunks}
	if p.e.EstimatePrompt != nil {
		u.in = p.e.EstimatePrompt()
	}
	items := append(append([]byte{'['}, p.items...), ']')
	resp, err := api.SetMembers(p.created, map[string]json.RawMessage{
		"status": json.RawMessage(`"failed"`), "error": ErrorObject(body), "output": items, "usage": appendUsage(nil, &u),
	})
	if err != nil {
		resp = p.e.m.appendResponse(nil, nil, &final{status: "failed", err: ErrorObject(body), usage: &u}, nil)
	}
	b := fmt.Appendf(nil, `{"type":"response.failed","sequence_number":%d,"response":`, p.seq)
	b = append(append(b, resp...), '}')
	p.ended = true
	if err := w.Event(evFailed, b); err != nil {
		return err
	}
	return nil
}

func (p *passEncoder) KeepAlive(w *sse.Writer) error { return w.Comment(keepAliveText) }

func (p *passEncoder) ErrorBody(_ int, body []byte) []byte { return body }

// AnswerUsage reads the usage of a response object a Responses upstream
// answered (passed through as it came) as the ledger counts it:
// input_tokens (cached ones included, as OpenAI counts them) as prompt
// tokens with input_tokens_details.cached_tokens as cache reads,
// output_tokens (reasoning included) as completion tokens. It is nil when
// the response has no usage, Invalid when a count is not a token count
// (api.CountLimit); an error when the body is not JSON.
func AnswerUsage(body []byte) (*api.Usage, error) {
	var r struct {
		Usage *struct {
			InputTokens        api.TokenCount `json:"input_tokens"`
			OutputTokens       api.TokenCount `json:"output_tokens"`
			InputTokensDetails struct {
				CachedTokens api.TokenCount `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("responses: the upstream's response: %w", err)
	}
	u := r.Usage
	if u == nil {
		return nil, nil
	}
	in, out, cached := u.InputTokens, u.OutputTokens, u.InputTokensDetails.CachedTokens
	if in.Invalid || out.Invalid || cached.Invalid || in.N+out.N >= api.CountLimit {
		return &api.Usage{Invalid: true}, nil
	}
	return &api.Usage{PromptTokens: in.N, CompletionTokens: out.N, TotalTokens: in.N + out.N,
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: min(cached.N, in.N)}}, nil
}
