package sim

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Request header names. See the package documentation for their meaning.
const (
	HeaderProfile         = "X-Sim-Profile"
	HeaderTTFT            = "X-Sim-TTFT"
	HeaderTTFTP99         = "X-Sim-TTFT-P99"
	HeaderITL             = "X-Sim-ITL"
	HeaderITLJitter       = "X-Sim-ITL-Jitter"
	HeaderPrefillPerToken = "X-Sim-Prefill-Per-Token"
	HeaderTokens          = "X-Sim-Tokens"
	HeaderTokensPerChunk  = "X-Sim-Tokens-Per-Chunk"
	HeaderLang            = "X-Sim-Lang"
	HeaderSeed            = "X-Sim-Seed"
	HeaderFailStatus      = "X-Sim-Fail-Status"
	HeaderFailRate        = "X-Sim-Fail-Rate"
	HeaderStallFirst      = "X-Sim-Stall-First"
	HeaderStallFirstRate  = "X-Sim-Stall-First-Rate"
	HeaderStallAt         = "X-Sim-Stall-At"
	HeaderStallFor        = "X-Sim-Stall-For"
	HeaderStallRate       = "X-Sim-Stall-Rate"
	HeaderCutAt           = "X-Sim-Cut-At"
	HeaderCutRate         = "X-Sim-Cut-Rate"
	HeaderErrorAt         = "X-Sim-Error-At"
	HeaderErrorRate       = "X-Sim-Error-Rate"
	HeaderMalformedAt     = "X-Sim-Malformed-At"
	HeaderMalformedRate   = "X-Sim-Malformed-Rate"
	// HeaderToolCall names a tool the request offers: the answer is one
	// call of it instead of text. Read by the chat endpoints only.
	HeaderToolCall = "X-Sim-Tool-Call"
	// HeaderThinkingTokens overrides Profile.ThinkingTokens.
	HeaderThinkingTokens = "X-Sim-Thinking-Tokens"
	// HeaderRedactedThinking "true" makes the Anthropic dialect send its
	// thinking as one redacted_thinking block.
	HeaderRedactedThinking = "X-Sim-Redacted-Thinking"
)

// headerError names the header whose value is invalid.
type headerError struct {
	header string
	err    error
}

func (e *headerError) Error() string { return fmt.Sprintf("invalid %s header: %v", e.header, e.err) }
func (e *headerError) Unwrap() error { return e.err }

// headerParser reads X-Sim-* values, remembering the first error.
type headerParser struct {
	h   http.Header
	err error
}

func (p *headerParser) fail(name string, err error) {
	if p.err == nil {
		p.err = &headerError{header: name, err: err}
	}
}

func (p *headerParser) get(name string) (string, bool) {
	v := p.h.Get(name)
	return v, v != ""
}

func (p *headerParser) duration(name string, dst *time.Duration) bool {
	v, ok := p.get(name)
	if !ok {
		return false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		p.fail(name, fmt.Errorf("%q is not a non-negative duration like 250ms", v))
		return false
	}
	*dst = d
	return true
}

func (p *headerParser) integer(name string, min, max int, dst *int) bool {
	v, ok := p.get(name)
	if !ok {
		return false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		p.fail(name, fmt.Errorf("%q is not an integer in [%d, %d]", v, min, max))
		return false
	}
	*dst = n
	return true
}

func (p *headerParser) float(name string, min, max float64, dst *float64) bool {
	v, ok := p.get(name)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= min && f <= max) {
		p.fail(name, fmt.Errorf("%q is not a number in [%g, %g]", v, min, max))
		return false
	}
	*dst = f
	return true
}

// faultRule applies the "value given / rate given" rule shared by flags
// and headers to one fault: setting the value without the rate makes the
// fault hit every request (rate 0 with a value = always); setting the rate
// to 0 switches the fault off entirely.
func faultRule(valueSet, rateSet bool, rate float64, clearValue func(), dstRate *float64) {
	switch {
	case rateSet && rate == 0:
		clearValue()
		*dstRate = 0
	case rateSet:
		*dstRate = rate
	case valueSet:
		*dstRate = 0 // with the value set: every request
	}
}

// applyHeaders overrides p with the request's X-Sim-* headers. seed is set
// when X-Sim-Seed is present, redacted by X-Sim-Redacted-Thinking. The
// error names the first invalid header.
func applyHeaders(h http.Header, p *Profile, seed *int64, seedSet, redacted *bool) error {
	hp := headerParser{h: h}
	// A header of a figure replaces the profile's distribution of it.
	ttft := hp.duration(HeaderTTFT, &p.TTFT)
	ttftP99 := hp.duration(HeaderTTFTP99, &p.TTFTP99)
	if !ttftP99 && ttft && p.TTFTP99 < p.TTFT {
		p.TTFTP99 = p.TTFT
	}
	if ttft || ttftP99 {
		p.TTFTDist = nil
	}
	itl := hp.duration(HeaderITL, &p.ITL)
	if jitter := hp.float(HeaderITLJitter, 0, 10, &p.ITLJitter); itl || jitter {
		p.ITLDist = nil
	}
	hp.duration(HeaderPrefillPerToken, &p.PrefillPerToken)
	if hp.integer(HeaderTokens, 1, 1<<20, &p.Tokens) {
		p.TokensDist = nil
	}
	if hp.integer(HeaderTokensPerChunk, 1, 1<<16, &p.TokensPerChunk) {
		p.ChunkDist = nil
	}
	if v, ok := hp.get(HeaderLang); ok {
		if v != "en" && v != "ko" {
			hp.fail(HeaderLang, fmt.Errorf("%q is not en or ko", v))
		} else {
			p.Lang = v
		}
	}
	hp.integer(HeaderThinkingTokens, 1, 1<<20, &p.ThinkingTokens)
	if v, ok := hp.get(HeaderRedactedThinking); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			hp.fail(HeaderRedactedThinking, fmt.Errorf("%q is not true or false", v))
		}
		*redacted = b
	}
	if v, ok := hp.get(HeaderSeed); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			hp.fail(HeaderSeed, fmt.Errorf("%q is not an integer", v))
		} else {
			*seed, *seedSet = n, true
		}
	}

	f := &p.Faults
	var rate float64
	vs := hp.integer(HeaderFailStatus, 400, 599, &f.FailStatus)
	rs := hp.float(HeaderFailRate, 0, 1, &rate)
	faultRule(vs, rs, rate, func() { f.FailStatus = 0 }, &f.FailRate)

	vs = hp.duration(HeaderStallFirst, &f.StallFirst)
	rs = hp.float(HeaderStallFirstRate, 0, 1, &rate)
	faultRule(vs, rs, rate, func() { f.StallFirst = 0 }, &f.StallFirstRate)

	vs = hp.integer(HeaderStallAt, 1, 1<<30, &f.StallAt)
	vs = hp.duration(HeaderStallFor, &f.StallFor) || vs
	rs = hp.float(HeaderStallRate, 0, 1, &rate)
	faultRule(vs, rs, rate, func() { f.StallAt, f.StallFor = 0, 0 }, &f.StallRate)

	vs = hp.integer(HeaderCutAt, 1, 1<<30, &f.CutAt)
	rs = hp.float(HeaderCutRate, 0, 1, &rate)
	faultRule(vs, rs, rate, func() { f.CutAt = 0 }, &f.CutRate)

	vs = hp.integer(HeaderErrorAt, 1, 1<<30, &f.ErrorAt)
	rs = hp.float(HeaderErrorRate, 0, 1, &rate)
	faultRule(vs, rs, rate, func() { f.ErrorAt = 0 }, &f.ErrorRate)

	vs = hp.integer(HeaderMalformedAt, 1, 1<<30, &f.MalformedAt)
	rs = hp.float(HeaderMalformedRate, 0, 1, &rate)
	faultRule(vs, rs, rate, func() { f.MalformedAt = 0 }, &f.MalformedRate)

	if hp.err == nil && p.TTFTP99 < p.TTFT {
		hp.fail(HeaderTTFTP99, fmt.Errorf("%s is below the median ttft %s", p.TTFTP99, p.TTFT))
	}
	return hp.err
}
