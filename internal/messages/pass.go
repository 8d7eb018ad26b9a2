package messages

import (
	"encoding/json"
	"fmt"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/sse"
)

// Pass implements relay.Passer: the stream of an upstream that speaks the
// Messages API itself (provider.DialectAnthropic) reaches the client as it
// came, event for event and byte for byte: message_start with the
// upstream's id and model, thinking blocks with their signature_delta,
// citations, server tool blocks and event types to come. Its own
// message_stop ends it; a failure after the commit point is one "error"
// event and a keep-alive a ping, as for a translated stream.
func (e *Encoder) Pass(dialect string) relay.Encoder {
	if dialect != provider.DialectAnthropic {
		return nil
	}
	return passEncoder{}
}

// passEncoder is the Encoder of a passed-through stream (see Encoder.Pass).
type passEncoder struct{}

var _ relay.Passer = (*Encoder)(nil)

func (passEncoder) Reset() {}

func (passEncoder) Event(w *sse.Writer, ev *sse.Event, _ *api.ChunkInfo) error {
	return w.Queue(ev.Name, ev.Data)
}

// Done flushes: the upstream's message_stop was the stream's last event.
func (passEncoder) Done(w *sse.Writer) error { return w.Flush() }

func (passEncoder) Error(w *sse.Writer, body []byte) error {
	return w.Event([]byte("error"), ErrorBody(0, body))
}

func (passEncoder) KeepAlive(w *sse.Writer) error { return w.Event([]byte("ping"), pingData) }

func (passEncoder) ErrorBody(status int, body []byte) []byte { return ErrorBody(status, body) }

// AnswerUsage reads the usage of a Message an Anthropic upstream answered
// (passed through as it came) as the ledger counts it: prompt tokens are
// input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
// completion tokens output_tokens, as for a translated answer. It is nil
// when the Message has no usage, Invalid when a count is not a token count
// (api.CountLimit); an error when the body is not JSON.
func AnswerUsage(body []byte) (*api.Usage, error) {
	var m struct {
		Usage *struct {
			InputTokens              api.TokenCount `json:"input_tokens"`
			OutputTokens             api.TokenCount `json:"output_tokens"`
			CacheReadInputTokens     api.TokenCount `json:"cache_read_input_tokens"`
			CacheCreationInputTokens api.TokenCount `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("messages: the upstream's answer: %w", err)
	}
	u := m.Usage
	if u == nil {
		return nil, nil
	}
	if u.InputTokens.Invalid || u.OutputTokens.Invalid || u.CacheReadInputTokens.Invalid || u.CacheCreationInputTokens.Invalid {
		return &api.Usage{Invalid: true}, nil
	}
	prompt := u.InputTokens.N + u.CacheReadInputTokens.N + u.CacheCreationInputTokens.N
	out := u.OutputTokens.N
	if prompt+out >= api.CountLimit {
		return &api.Usage{Invalid: true}, nil
	}
	return &api.Usage{PromptTokens: prompt, CompletionTokens: out, TotalTokens: prompt + out,
		PromptTokensDetails: api.PromptTokensDetails{CachedTokens: u.CacheReadInputTokens.N, CacheWriteTokens: u.CacheCreationInputTokens.N}}, nil
}
