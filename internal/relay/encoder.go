package relay

import (
	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

// Encoder writes a stream in the client's dialect. The relay reads every
// upstream in the OpenAI chunk dialect (adapters translate) and hands each
// event to the Encoder with what api.ScanChunk found in it, so the commit
// point, the timers, fallback and the measurements are one piece of code
// whatever the client speaks; an upstream that speaks the client's own
// dialect is passed through instead (Passer). The zero Options.Encoder is OpenAI's: events
// pass through as they are. An Encoder is used by one Session at a time.
type Encoder interface {
	// Reset forgets what an abandoned attempt wrote: the relay calls it at
	// the start of each attempt while no content reached the client (what
	// the attempt held back is discarded with it).
	Reset()
	// Event writes one upstream event (an OpenAI chunk in ev.Data) without
	// flushing it. It may write nothing (a chunk the dialect has no event
	// for) or several events.
	Event(w *sse.Writer, ev *sse.Event, info *api.ChunkInfo) error
	// Done ends a complete stream and flushes.
	Done(w *sse.Writer) error
	// Error writes the stream's one error event and flushes; body is an
	// OpenAI error object ({"error":{...}}).
	Error(w *sse.Writer, body []byte) error
	// KeepAlive writes a heartbeat the client ignores and flushes.
	KeepAlive(w *sse.Writer) error
	// ErrorBody returns the body of an HTTP error answer with status (before
	// the commit point) for the OpenAI error object body.
	ErrorBody(status int, body []byte) []byte
}

// Passer is an optional capability of an Encoder whose dialect an upstream
// may speak natively: Pass returns the Encoder of an attempt whose stream
// is in the client's dialect already (a provider.Passthrough stream of
// dialect), which writes its events as they came (same dialect, same
// bytes: the stream's own end event ends it, Done only flushes) and
// writes errors, keep-alives and error bodies as the Encoder does; nil
// when the Encoder does not speak dialect. The Session measures a passed
// stream as any other, from the stream's ChunkInfo.
type Passer interface {
	Pass(dialect string) Encoder
}

// Prompter is an optional capability of an Encoder whose dialect tells
// the prompt's tokens before the answer (Anthropic's message_start.usage):
// before an attempt's first event is encoded, the Session gives Prompt the
// prompt tokens (cache reads and writes in PromptTokensDetails) the
// upstream reported by then (provider.Reporter), else Options.Prompt's
// estimate in PromptTokens. Not called for a continuation, nor for a
// stream passed through.
type Prompter interface {
	Prompt(u api.Usage)
}

// OpenAI is the Encoder of OpenAI's chat completion stream: chunks pass
// through byte for byte, "[DONE]" ends the stream, an error is one
// data-only event, a keep-alive a comment.
var OpenAI Encoder = openAIEncoder{}

type openAIEncoder struct{}

func (openAIEncoder) Reset() {}

func (openAIEncoder) Event(w *sse.Writer, ev *sse.Event, _ *api.ChunkInfo) error {
	return w.Queue(ev.Name, ev.Data)
}

func (openAIEncoder) Done(w *sse.Writer) error { return w.Done() }

func (openAIEncoder) Error(w *sse.Writer, body []byte) error { return w.Data(body) }

func (openAIEncoder) KeepAlive(w *sse.Writer) error { return w.Comment(keepAliveText) }

func (openAIEncoder) ErrorBody(_ int, body []byte) []byte { return body }

var keepAliveText = []byte("keep-alive")
