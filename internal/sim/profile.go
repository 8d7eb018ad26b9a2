package sim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Profile is how one simulated model behaves. A Profile is a plain value
// (comparable, no references), so copies are independent.
//
// Zero values of fields: TTFT, ITL, PrefillPerToken 0 mean no wait; TTFTP99 0
// (or equal to TTFT) means a constant TTFT; ITLJitter 0 means constant gaps;
// TokensPerChunk 0 means the dialect's default (see TokensPerChunk); Tokens 0
// means 200; Lang "" means "en"; ThinkingTokens 0 means 64; CacheMinTokens 0
// means 1024.
type Profile struct {
	// Name is the model name that selects this profile.
	Name string
	// TTFT is the median time from admission (after any queue wait) to the
	// first token; TTFTP99 its 99th percentile. The draw is lognormal.
	TTFT    time.Duration
	TTFTP99 time.Duration
	// ITL is the mean gap between consecutive content chunks (a chunk carries
	// TokensPerChunk tokens; the gap is per chunk, not per token).
	ITL time.Duration
	// ITLJitter is the relative standard deviation of a gap (lognormal, mean ITL).
	ITLJitter float64
	// PrefillPerToken is added to the TTFT for every estimated prompt token.
	PrefillPerToken time.Duration
	// TokensPerChunk is the tokens of one content chunk (event). 0 means
	// the dialect's default, the size the provider's own events have:
	// OpenAI 1 (a chat.completion.chunk per token), Anthropic
	// DefaultAnthropicTokensPerChunk (a text_delta holds a few words),
	// Gemini DefaultGeminiTokensPerChunk (a GenerateContentResponse holds a
	// phrase or a sentence); with the default each chunk then comes
	// TokensPerChunk × ITL after the previous one, so a profile's token
	// rate is the same in every dialect. A value set here (or by
	// X-Sim-Tokens-Per-Chunk) keeps ITL as the gap per chunk.
	TokensPerChunk int
	// Tokens is the output length when the request sets no max_tokens or a
	// larger one.
	Tokens int
	// Lang is the output text language: "en" or "ko" (multi-byte UTF-8).
	Lang string
	// Reasoning makes the model think before every answer in the OpenAI
	// and Gemini dialects, as reasoning models do, unless the request says
	// otherwise (reasoning_effort none, thinkingBudget 0). The request can
	// also ask for it without: OpenAI reasoning_effort, Gemini
	// thinkingConfig; Anthropic thinks only when its request asks (thinking).
	// See the package documentation, "Thinking".
	Reasoning bool
	// ThinkingTokens is the length of a thinking (reasoning) phase, capped
	// by the request's budget (Anthropic budget_tokens, Gemini
	// thinkingBudget) and scaled by OpenAI's reasoning_effort.
	ThinkingTokens int
	// CacheMinTokens is the shortest prefix a prompt cache keeps: an
	// Anthropic cache_control breakpoint whose prefix is shorter is ignored,
	// and OpenAI's and Gemini's automatic caching starts there. 0 means
	// 1024, Anthropic's minimum for Sonnet and Opus and OpenAI's.
	CacheMinTokens int
	// InputPrice and OutputPrice are USD per 1M tokens: the published prices
	// of the real model the profile imitates, for cost tables. 0 = unknown.
	InputPrice  float64
	OutputPrice float64
	Faults      Faults

	// Distributions (see Dist). Each one set replaces the fields it names;
	// nil keeps them. They are shared, immutable tables, so Profile stays
	// a comparable value.
	//
	// TTFTDist is the TTFT's distribution (nanoseconds), drawn per request
	// instead of the lognormal of TTFT and TTFTP99.
	TTFTDist *Dist
	// ITLDist is the distribution of one gap between content chunks
	// (nanoseconds), drawn per gap instead of ITL and ITLJitter. ITL 0 is
	// then its median (the pace of hidden thinking).
	ITLDist *Dist
	// TokensDist is the output length's distribution (tokens, rounded,
	// at least 1), drawn per request instead of Tokens; max_tokens still
	// caps it.
	TokensDist *Dist
	// ChunkDist is the tokens of each text content chunk, drawn per chunk
	// instead of TokensPerChunk; the gap stays per chunk. Thinking and tool
	// call fragments keep TokensPerChunk, which is 0 then means ChunkDist's
	// mean rounded.
	ChunkDist *Weights
	// Hourly multiplies the TTFT and every gap by Hourly[h], h the UTC hour
	// at which the request arrives (a time-of-day shape). nil means 1.
	Hourly *[24]float64
	// Source says where the profile's figures come from (free text; shown
	// by --help and kept in exported files).
	Source string
}

// Faults are injected failures. The zero value injects nothing.
//
// A fault is on when its value or its rate is set. Its rate is the fraction
// of requests it hits, drawn from the request's seeded randomness; a rate of
// 0 with the value set means every request (so Faults{CutAt: 3} always cuts).
// A value of 0 with a rate set takes the default (503, 10s, a random chunk).
//
// "At" fields count content chunks from 1: the fault happens just before
// content chunk N would be sent (N-1 were delivered; the role chunk precedes
// chunk 1). An At beyond the last content chunk means "after the last
// content chunk, before the finish chunk".
type Faults struct {
	// FailStatus is the HTTP status answered before any stream, with the
	// dialect's error body (OpenAI's and Anthropic's with Retry-After: 1 on
	// 429, Gemini's with a RetryInfo detail). 0 means 503.
	FailStatus int
	FailRate   float64
	// StallFirst delays the first event (nothing at all is sent before it,
	// not even the role chunk). 0 means 10s.
	StallFirst     time.Duration
	StallFirstRate float64
	// StallAt stalls for StallFor before content chunk StallAt; later chunks
	// keep their pace after it. StallFor 0 means 10s.
	StallAt   int
	StallFor  time.Duration
	StallRate float64
	// CutAt closes the connection before content chunk CutAt: no finish
	// chunk, no [DONE] (message_stop, finishReason), no terminating HTTP
	// chunk (the client sees an unexpected EOF).
	CutAt   int
	CutRate float64
	// ErrorAt sends the dialect's error event before content chunk ErrorAt
	// (OpenAI `data: {"error":{...}}`, Anthropic `event: error` with
	// overloaded_error, Gemini `data: {"error":{...}}` UNAVAILABLE) and ends
	// the response there, without [DONE] (message_stop, finishReason).
	ErrorAt   int
	ErrorRate float64
	// MalformedAt sends a `data:` line that is not valid JSON before content
	// chunk MalformedAt, then the stream continues normally.
	MalformedAt   int
	MalformedRate float64
}

// Fault defaults used when a fault is selected but its value is zero.
const (
	DefaultFailStatus = 503
	DefaultStall      = 10 * time.Second
	DefaultTokens     = 200
)

// Defaults of the fields whose zero value means "as the provider does".
const (
	// DefaultAnthropicTokensPerChunk and DefaultGeminiTokensPerChunk are
	// the tokens per content chunk of a profile that sets none, in those
	// dialects (OpenAI's is 1).
	DefaultAnthropicTokensPerChunk = 4
	DefaultGeminiTokensPerChunk    = 16
	DefaultThinkingTokens          = 64
	DefaultCacheMinTokens          = 1024
)

// DefaultProfile is the profile of `streamgate sim` without flags, also used
// when Options.Profile is the zero value: TTFT 250ms median / 800ms p99, ITL
// 20ms with 0.2 jitter, 200 tokens, the dialect's tokens per chunk, English,
// no faults.
func DefaultProfile() Profile {
	return Profile{
		Name:      "sim-default",
		TTFT:      250 * time.Millisecond,
		TTFTP99:   800 * time.Millisecond,
		ITL:       20 * time.Millisecond,
		ITLJitter: 0.2,
		Tokens:    DefaultTokens,
		Lang:      "en",
	}
}

// Profiles returns the built-in profiles, a fresh slice each call. Every
// one is simulated: its name starts with "sim-" and its Source says where
// its figures come from. The four seed models (GPT-4.1, Claude Sonnet 4.5,
// Gemini 2.5 Flash, DeepSeek V3.2) take their TTFT median and their token
// rate (ITL = 1 / output tokens per second) from published third-party
// medians, Artificial Analysis's leaderboard figures for the model on its
// maker's API as quoted by public pages, approximate and as of the month
// each Source names; their p99 is an assumption (about 2.5× the median), as
// those sources publish medians only. Prices are the published ones (USD
// per 1M tokens). Their tokens per chunk are the dialect's default.
//
//	name                   TTFT p50/p99  ITL    jitter  in $   out $   faults
//	sim-fast               20ms/50ms     5ms    0.1     -      -       -
//	sim-gpt-4.1            520ms/1.3s    11ms   0.3     2.00   8.00    -
//	sim-claude-sonnet-4.5  1.8s/4.5s     16ms   0.35    3.00   15.00   -
//	sim-gemini-2.5-flash   540ms/1.35s   4.5ms  0.5     0.30   2.50    -
//	sim-deepseek-v3.2      2.3s/5.75s    21ms   0.3     0.28   0.42    -
//	sim-flaky              300ms/1.5s    15ms   0.3     -      -       503 at 0.1, cut at 0.1
func Profiles() []Profile {
	base := func(name string, ttft, p99, itl time.Duration, jitter float64, source string) Profile {
		return Profile{Name: name, TTFT: ttft, TTFTP99: p99, ITL: itl, ITLJitter: jitter,
			Tokens: DefaultTokens, Lang: "en", Source: source}
	}
	ms := time.Millisecond
	const aa = "simulated; TTFT median and output speed approximate, Artificial Analysis medians "
	fast := base("sim-fast", 20*ms, 50*ms, 5*ms, 0.1, "simulated; a fast test upstream, no real model")
	gpt := base("sim-gpt-4.1", 520*ms, 1300*ms, 11*ms, 0.3,
		aa+"for GPT-4.1 on the OpenAI API (~0.52 s, ~89 tokens/s) as quoted publicly, as of 2025; p99 assumed")
	gpt.InputPrice, gpt.OutputPrice = 2.00, 8.00
	claude := base("sim-claude-sonnet-4.5", 1800*ms, 4500*ms, 16*ms, 0.35,
		aa+"for Claude Sonnet 4.5 on the Anthropic API (~1.8 s, ~63 tokens/s) as quoted publicly, as of November 2025; p99 assumed")
	claude.InputPrice, claude.OutputPrice = 3.00, 15.00
	gemini := base("sim-gemini-2.5-flash", 540*ms, 1350*ms, 4500*time.Microsecond, 0.5,
		aa+"for Gemini 2.5 Flash on Google AI Studio (~0.54 s, ~221 tokens/s) as quoted by benchlm.ai, as of April 2026; p99 assumed")
	gemini.InputPrice, gemini.OutputPrice = 0.30, 2.50
	deepseek := base("sim-deepseek-v3.2", 2300*ms, 5750*ms, 21*ms, 0.3,
		aa+"for DeepSeek's own API (~2.3 s, ~48 tokens/s, the average of its two models there) as quoted by benchlm.ai, as of April 2026; p99 assumed")
	deepseek.InputPrice, deepseek.OutputPrice = 0.28, 0.42
	flaky := base("sim-flaky", 300*ms, 1500*ms, 15*ms, 0.3, "simulated; an unreliable upstream (10 % 503s, 10 % cut streams), no real model")
	flaky.Faults = Faults{FailStatus: 503, FailRate: 0.1, CutRate: 0.1}
	return []Profile{fast, gpt, claude, gemini, deepseek, flaky}
}

// LookupProfile returns the built-in profile called name, or false.
func LookupProfile(name string) (Profile, bool) {
	for _, p := range Profiles() {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// normalize fills the documented zero-value defaults.
func (p Profile) normalize() Profile {
	if p.TokensPerChunk < 0 {
		p.TokensPerChunk = 0 // the dialect's default
	}
	if p.ThinkingTokens <= 0 {
		p.ThinkingTokens = DefaultThinkingTokens
	}
	if p.CacheMinTokens <= 0 {
		p.CacheMinTokens = DefaultCacheMinTokens
	}
	if p.Tokens <= 0 {
		p.Tokens = DefaultTokens
	}
	if p.Lang == "" {
		p.Lang = "en"
	}
	if p.TTFTP99 < p.TTFT {
		p.TTFTP99 = p.TTFT
	}
	if p.ITLDist != nil && p.ITL == 0 {
		p.ITL = time.Duration(p.ITLDist.Quantile(0.5))
	}
	if p.ChunkDist != nil && p.TokensPerChunk == 0 {
		p.TokensPerChunk = max(1, int(math.Round(p.ChunkDist.Mean())))
	}
	return p
}

// Validate reports every invalid field of p, joined.
func (p Profile) Validate() error {
	var errs []error
	bad := func(field string, format string, a ...any) {
		errs = append(errs, fmt.Errorf("profile %q: %s: %s", p.Name, field, fmt.Sprintf(format, a...)))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttft", p.TTFT}, {"ttft-p99", p.TTFTP99}, {"itl", p.ITL}, {"prefill-per-token", p.PrefillPerToken},
		{"stall-first", p.Faults.StallFirst}, {"stall-for", p.Faults.StallFor}} {
		if d.v < 0 {
			bad(d.name, "negative duration %s", d.v)
		}
	}
	if p.TTFTP99 != 0 && p.TTFTP99 < p.TTFT {
		bad("ttft-p99", "%s is below the median ttft %s", p.TTFTP99, p.TTFT)
	}
	if p.ITLJitter < 0 || p.ITLJitter > 10 {
		bad("itl-jitter", "%g is outside [0, 10]", p.ITLJitter)
	}
	if p.TokensPerChunk < 0 {
		bad("tokens-per-chunk", "negative %d", p.TokensPerChunk)
	}
	if p.Tokens < 0 {
		bad("tokens", "negative %d", p.Tokens)
	}
	if p.ThinkingTokens < 0 {
		bad("thinking-tokens", "negative %d", p.ThinkingTokens)
	}
	if p.CacheMinTokens < 0 {
		bad("cache-min-tokens", "negative %d", p.CacheMinTokens)
	}
	if p.Hourly != nil {
		for h, m := range p.Hourly {
			if !(m > 0 && m <= 100) {
				bad("hourly", "hour %d: multiplier %g is outside (0, 100]", h, m)
			}
		}
	}
	if p.Lang != "" && p.Lang != "en" && p.Lang != "ko" {
		bad("lang", "%q is not en or ko", p.Lang)
	}
	f := p.Faults
	if f.FailStatus != 0 && (f.FailStatus < 400 || f.FailStatus > 599) {
		bad("fail-status", "%d is not an HTTP error status (400-599)", f.FailStatus)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"fail-rate", f.FailRate}, {"stall-first-rate", f.StallFirstRate}, {"stall-rate", f.StallRate},
		{"cut-rate", f.CutRate}, {"error-rate", f.ErrorRate}, {"malformed-rate", f.MalformedRate}} {
		if r.v < 0 || r.v > 1 || r.v != r.v {
			bad(r.name, "%g is outside [0, 1]", r.v)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"stall-at", f.StallAt}, {"cut-at", f.CutAt}, {"error-at", f.ErrorAt}, {"malformed-at", f.MalformedAt}} {
		if n.v < 0 {
			bad(n.name, "negative chunk %d", n.v)
		}
	}
	return errors.Join(errs...)
}
