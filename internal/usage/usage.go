// Package usage is the ledger: every request that reaches the gateway ends as
// exactly one Entry, whatever failed. Entries are queued without blocking the
// request path and written in batches to SQLite or PostgreSQL.
package usage

import "time"

// Outcome values of an Entry.
const (
	OutcomeOK              = "ok"               // answered in full
	OutcomeClientCancelled = "client_cancelled" // the client went away (logged as 499)
	OutcomeUpstreamError   = "upstream_error"   // every route failed, or a stream broke
	OutcomeTimeout         = "timeout"          // a gateway timeout fired
	OutcomeRejected        = "rejected"         // refused before any upstream call (auth, bad input)
	// OutcomeUntranslatable: refused by the gateway because no route that
	// could be tried can be sent the request as written (a field the
	// routes' dialect cannot carry, named in Error), though a route that
	// failed may have been attempted first (Attempts counts it). Not an
	// upstream's error: reports count it with the refusals, under no route.
	OutcomeUntranslatable = "untranslatable"
)

// TokenSource values of an Entry: where its tokens come from.
const (
	SourceUsage     = "usage"     // every billed attempt reported its usage
	SourceEstimated = "estimated" // no count was reported (or none valid): the prompts estimated from the request, the output from the text sent
	SourcePartial   = "partial"   // some counts were reported, the rest estimated (a stream cut after its upstream reported its prompt tokens, a hedge's loser)
	SourceNone      = "none"      // nothing was billed: refused before any upstream call, or every attempt refused by its upstream or never connected
)

// Entry is one request's ledger line.
//
// ID is the ledger's own key, distinct from RequestID (which echoes a client's
// X-Request-Id and may repeat). Leave it empty: the Writer assigns one before
// the first write attempt and Store.Insert assigns one in place when missing,
// so a retried batch can never land twice. A zero Time is set to the time of
// Record by the Writer. Stores keep Time to the microsecond, in UTC.
type Entry struct {
	ID            string
	RequestID     string
	Time          time.Time // when the request arrived
	KeyID         string    // the key's name, never the secret; "" when unauthenticated
	Model         string    // the model the client asked for
	Route         string    // "provider/model" that served it, "" when none did
	Attempts      int       // upstream attempts made
	Continuations int       // times a stream cut mid-answer was continued by another attempt (0: none); the tokens are the sum of the attempts'
	Hedged        bool      // a second (hedged) upstream attempt was started for the first token: both attempts are billed and in Attempts, Route names the winner
	Stream        bool
	Status        int    // HTTP status sent (499 for a client that went away)
	Outcome       string // one of the Outcome constants
	InputTokens   int    // every prompt token, the cache reads and writes included
	OutputTokens  int    // reasoning tokens included
	// CacheReadTokens and CacheWriteTokens are the parts of InputTokens
	// the upstreams read from and wrote to their prompt caches, billed at
	// the model's cached_input and cache_write prices (0 for entries
	// written before the ledger kept them).
	CacheReadTokens  int
	CacheWriteTokens int
	// Team is the key's team ("" when it has none); ProviderKey the name
	// (never the secret) of the provider API key of the attempt that
	// served the request, "" for a provider with a single api_key.
	Team        string
	ProviderKey string
	TokenSource string        // one of the TokenSource constants
	CostUSD     float64       // from the model's configured prices; stored in [0, $1e9] (usd.Clamp)
	TTFT        time.Duration // 0: no first token (a non-stream, a stream that failed before content), stored as NULL
	Duration    time.Duration
	Error       string // the error message when Outcome is not ok
}

// Recorder accepts ledger entries. Record must not block the request path.
type Recorder interface {
	Record(Entry)
}
