package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/usage"
)

// bill is what the upstreams will charge for one request, summed over its
// attempts: each attempt that reached an upstream is billed by it, also one
// abandoned for the next route or cut before its usage chunk. An attempt
// the upstream refused with an error status, or that never connected, costs
// nothing.
type bill struct {
	in, out   int
	billed    bool // some attempt reached an upstream
	estimated bool // some count was estimated
	reported  bool // some count was reported by an upstream
	prompt    int  // the prompt estimate, once computed (0: not yet)

	// cacheRead and cacheWrite are the parts of in that the upstreams
	// reported read from and written to their prompt caches.
	cacheRead, cacheWrite int
}

// counted is what an attempt tells of its tokens: the usage its upstream
// reported (nil when none came; a usage with a count that is not a token
// count, u.Invalid, is none), which of its counts stand for the whole
// attempt (see relay.Stats), and the estimate of its output from the text
// it sent (fit.Text).
type counted struct {
	u              *api.Usage
	prompt, output bool
	text           int
}

// fully is an attempt's usage that tells everything (a non-streaming
// answer's), or none (nil).
func fully(u *api.Usage) counted { return counted{u: u, prompt: true, output: true} }

// streamed is what a stream attempt told, from the relay's Stats of it.
func streamed(s *relay.Stats) counted {
	c := counted{prompt: s.PromptReported, output: s.OutputReported, text: s.Output}
	if s.HasUsage {
		u := s.Usage
		c.u = &u
	}
	return c
}

// attempt adds one attempt: opened when the upstream accepted it, err how
// it ended, c what it told. Each count the upstream reported for the whole
// attempt is billed as reported; the rest is estimated: the prompt from
// the request (EstimateTokens, on the high side), the output from the text
// the attempt sent, or the output count the upstream reported before its
// last content when that is larger. The cache reads and writes are bounded
// by the prompt tokens (reads first), so that they never bill more prompt
// tokens than the upstream counted.
func (b *bill) attempt(req *provider.Request, opened bool, err error, c counted) {
	if !opened && !abandonedInFlight(err) {
		return
	}
	b.billed = true
	u := c.u
	if u != nil && u.Invalid {
		u = nil
	}
	if u != nil && c.prompt {
		read := min(u.PromptTokensDetails.CachedTokens, u.PromptTokens)
		b.in += u.PromptTokens
		b.cacheRead += read
		b.cacheWrite += min(u.PromptTokensDetails.CacheWriteTokens, u.PromptTokens-read)
		b.reported = true
	} else {
		b.in += b.promptTokens(req)
		b.estimated = true
	}
	switch {
	case u != nil && c.output:
		b.out += u.CompletionTokens
		b.reported = true
	case u != nil:
		b.out += max(c.text, u.CompletionTokens)
		b.estimated = true
	default:
		b.out += c.text
		b.estimated = true
	}
}

// answer adds a non-streaming answer: its usage, else estimates of the
// prompt and of the answer's text. An answer that is not JSON is billed as
// answered without usage and returns the syntax error: the one decode of
// the body is also its check.
func (b *bill) answer(req *provider.Request, body []byte) error {
	var resp struct {
		Usage   *api.Usage `json:"usage"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	err := json.Unmarshal(body, &resp)
	if err == nil && resp.Usage != nil && !resp.Usage.Invalid {
		b.attempt(req, true, nil, fully(resp.Usage))
		return nil
	}
	var text fit.Text
	for _, c := range resp.Choices {
		text.Add(c.Message.Content)
	}
	b.attempt(req, true, nil, counted{text: text.Tokens()})
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return err // not JSON; a JSON value of unexpected shape is only unbilled detail
	}
	return nil
}

// tokens returns the bill's tokens as prices apply to them.
func (b *bill) tokens() config.Tokens {
	return config.Tokens{Input: int64(b.in), CacheRead: int64(b.cacheRead), CacheWrite: int64(b.cacheWrite), Output: int64(b.out)}
}

// passed adds a non-streaming answer passed through in the client's own
// dialect: its usage as read reads it, else (none, or a count that is not
// a token count) an estimate of the prompt. An answer read cannot read
// (not JSON) is billed so too, and its error returned.
func (b *bill) passed(req *provider.Request, body []byte, read func([]byte) (*api.Usage, error)) error {
	u, err := read(body)
	b.attempt(req, true, nil, fully(u))
	return err
}

// source is the entry's token source: usage.SourceUsage when every count
// was reported, SourceEstimated when none was, SourcePartial when some
// were and the rest estimated, SourceNone when no attempt was billed.
func (b *bill) source() string {
	switch {
	case !b.billed:
		return usage.SourceNone
	case !b.estimated:
		return usage.SourceUsage
	case b.reported:
		return usage.SourcePartial
	}
	return usage.SourceEstimated
}

func (b *bill) promptTokens(req *provider.Request) int {
	if b.prompt == 0 && req != nil {
		b.prompt = max(1, fit.EstimateTokens(promptBody(req)))
	}
	return b.prompt
}

// abandonedInFlight reports whether an attempt that did not open a stream
// had been sent and was given up while the upstream may have been working
// on it (a timeout, the client leaving): the provider bills it.
func abandonedInFlight(err error) bool {
	return errors.Is(err, provider.ErrFirstTokenTimeout) || errors.Is(err, provider.ErrResponseTimeout) ||
		errors.Is(err, provider.ErrTotalTimeout) || errors.Is(err, context.Canceled) ||
		errors.Is(err, relay.ErrClientGone) || errors.Is(err, errShutdown) || errors.Is(err, relay.ErrHedgeLost)
}

// cacheSavings is what the prompt cache saved model on read and write
// tokens at its configured price (0 for a model the config does not know):
// the savings of /admin/usage and of the dashboard.
func (g *Gateway) cacheSavings(model string, read, write int64) float64 {
	p, ok := g.cur().cfg.Price(model)
	if !ok {
		return 0
	}
	return p.CacheSavings(read, write)
}

// promptBody is the body a request's prompt is estimated from: its chat
// form, or the client's own body when it has none (provider.Native.Err).
func promptBody(req *provider.Request) []byte {
	if req.Body == nil && req.Native != nil {
		return req.Native.Body
	}
	return req.Body
}
