// Package sim is the simulated upstream: an OpenAI-compatible server whose
// latency, output and faults follow a model profile, so the gateway and the
// benchmark run and are tested offline. Tokens are paced against absolute
// deadlines so the stream does not drift.
package sim

import (
	"net/http"
	"time"
)

// Options configure a simulated upstream. The zero value of a field means
// "the profile's value" unless its comment says otherwise.
type Options struct {
	Profile Profile // defaults for models without a profile of their own
	Stamp   bool    // write ": sent_ns=<unix ns>" before each event
	Seed    int64
	// MaxConcurrency bounds streams served at once; more wait in a queue. 0 = unlimited.
	MaxConcurrency int
}

// Profile is how one simulated model behaves.
type Profile struct {
	Name            string
	TTFT            time.Duration // median time to first token
	TTFTP99         time.Duration // p99 (lognormal); equal to TTFT means constant
	ITL             time.Duration // inter-token latency
	ITLJitter       float64       // relative standard deviation, 0 = constant
	PrefillPerToken time.Duration
	TokensPerChunk  int
	Tokens          int    // output length when max_tokens is absent
	Lang            string // "en" or "ko"
	Faults          Faults
}

// Faults are injected failures; each has a rate (fraction of requests, seeded).
type Faults struct {
	FailStatus int
	FailRate   float64
}

// New returns the simulator's HTTP handler (/v1/chat/completions, /v1/models, /metrics).
func New(opts Options) http.Handler { return http.NotFoundHandler() }
