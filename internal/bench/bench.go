// Package bench is the streaming benchmark behind "streamgate bench": it
// sends chat completion streams to any OpenAI-compatible endpoint in a
// closed loop (fixed concurrency) or an open loop (Poisson or gamma arrivals),
// times every chunk as it arrives, and summarises TTFT, inter-token latency,
// stalls and throughput with a self-check of the client's own delays.
package bench

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// Schema names the JSON layout of a Result.
const Schema = "streamgate.bench/v1"

// Config describes one benchmark point: one model at one load. Sweeps and
// several models are several Configs passed to RunAll. Zero values take the
// defaults documented on each field.
type Config struct {
	BaseURL string // the API root, e.g. http://127.0.0.1:8081/v1; the API's path ("/chat/completions") is appended
	// API is the client API the load speaks: APIChat ("" too), APIMessages
	// or APIResponses, each with its own first token and usage fields.
	API    string
	APIKey string // sent as "Authorization: Bearer"; empty sends none
	Model  string
	Label  string // free text carried into the result

	// Requests is how many measured requests to send; 0 means 100, or no
	// limit when Duration is set. Warmup requests are sent first and not measured.
	Requests int
	Warmup   int
	// Duration, when set, stops sending after that long; requests still
	// open Grace later (default 30s) are cancelled and counted as incomplete.
	Duration time.Duration
	Grace    time.Duration

	// Concurrency is the number of streams kept open (closed loop) or, with
	// Rate, the cap on open streams (0 = no cap). 0 without Rate means 1.
	Concurrency int
	// Rate, when > 0, sends requests open loop at this mean rate per second,
	// gaps drawn from a gamma distribution of shape Burstiness (0 or 1 = Poisson).
	Rate       float64
	Burstiness float64
	// RampUp starts the closed loop's workers evenly over this duration.
	RampUp time.Duration

	// Prompts is the dataset spec read by LoadPrompts (default builtin:en);
	// Dataset, when set, is used instead.
	Prompts string
	Dataset []Prompt
	// MaxTokens sets max_tokens on every request; 0 uses OutputTokens when
	// set, else the dataset's answer length, else leaves it out.
	MaxTokens    int
	OutputTokens Length
	// ExtraBody is a JSON object merged into every request body (e.g.
	// {"ignore_eos":true}); its fields override the benchmark's own.
	ExtraBody string
	// Headers are added to every request (e.g. X-Sim-* overrides).
	Headers http.Header
	// Trace, when set, replays its arrivals open loop (see trace_run.go)
	// instead of Rate or the closed loop: a prompt per entry, max_tokens
	// the recorded output; Prompts, Dataset, MaxTokens, OutputTokens and
	// Warmup are not used. Requests caps the entries sent (0: all of them).
	Trace *Trace
	// TraceSpeed scales the trace's time: 2 replays it twice as fast. 0 means 1.
	TraceSpeed float64
	// Sessions, when > 0, runs that many multi-turn conversations at once
	// (see session.go), each of Turns turns (0: DefaultTurns) ThinkTime
	// apart (±ThinkJitter), in place of Requests (set to Sessions × Turns),
	// Concurrency (Sessions), Rate and Duration; Warmup is not allowed.
	// Each turn's user message comes from the dataset, after a shared
	// system prompt of SystemTokens tokens (0: none). SessionID is how a
	// session tells its identity: SessionIDHeader ("" too), SessionIDBody
	// or SessionIDNone.
	Sessions     int
	Turns        int
	ThinkTime    time.Duration
	SessionID    string
	SystemTokens int
	// Transport is how a session's turns travel: TransportHTTP ("" too),
	// a request each, the whole conversation in each; or TransportWS
	// (--api responses only): one WebSocket per session (OpenAI's
	// WebSocket mode at GET {base}/responses), warmed up with the system
	// prompt (generate: false, not measured), then each turn's new user
	// message only, chained with previous_response_id and store: false,
	// as Codex's built-in provider sends them.
	Transport string
	// Seed makes the request sequence and the arrival times reproducible.
	Seed uint64

	// IdleTimeout ends a stream with no event for this long as interrupted
	// (default 60s); ConnectTimeout bounds dialing (default 10s).
	IdleTimeout    time.Duration
	ConnectTimeout time.Duration
	// HTTP2 lets streams share connections over HTTP/2 (h2c on http://);
	// by default every open stream has its own HTTP/1.1 connection.
	HTTP2 bool
	// RootCAs verify an https:// base URL in place of the system's pool
	// (--ca-file: a private endpoint, the simulator's --tls); nil: the
	// system's.
	RootCAs *x509.CertPool

	// Goodput, when set, counts the requests meeting every SLO.
	Goodput SLO
	// Price is the model's price in USD per 1M tokens; zero means no cost.
	Price Price
	// Scrape is a Prometheus /metrics URL read before and after the run.
	Scrape string
	// KeepRequests keeps every request's record in RunResult.Requests (for
	// --requests-out and the HTML report).
	KeepRequests bool

	// dial, when set, replaces the TCP dialer: tests run the client over
	// in-memory connections, on a synctest bubble's clock.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// SLO is a set of service-level objectives for goodput; a zero field is not checked.
type SLO struct {
	TTFT   time.Duration // time to first token
	ITL    time.Duration // the request's mean inter-token gap
	TPOT   time.Duration // time per output token
	E2E    time.Duration // end-to-end latency
	MaxGap time.Duration // the request's largest gap
}

// IsZero reports whether no objective is set.
func (s SLO) IsZero() bool { return s == SLO{} }

// Price is a model's price in USD per 1M tokens, the gateway's: input,
// output, and the prompt cache's cached_input and cache_write (the input
// price when unset).
type Price = config.Price

// Result is the whole outcome of a benchmark invocation, marshalled as the
// "streamgate.bench/v1" JSON of SPEC.md.
type Result struct {
	Schema    string      `json:"schema"`
	StartedAt time.Time   `json:"started_at"`
	Config    ConfigEcho  `json:"config"`
	Runs      []RunResult `json:"runs"`
	Client    ClientStats `json:"client"`
	// Partial is set when the run was stopped (Ctrl-C) before the end.
	Partial  bool     `json:"partial,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// ConfigEcho is the configuration as recorded in a result; the API key is redacted.
type ConfigEcho struct {
	BaseURL       string            `json:"base_url"`
	API           string            `json:"api"`
	APIKey        string            `json:"api_key,omitempty"`
	Models        []string          `json:"models"`
	Requests      int               `json:"requests"`
	Warmup        int               `json:"warmup"`
	Duration      string            `json:"duration,omitempty"`
	Concurrency   []int             `json:"concurrency"`
	Rate          []float64         `json:"rate,omitempty"`
	Burstiness    float64           `json:"burstiness,omitempty"`
	Prompts       string            `json:"prompts"`
	MaxTokens     int               `json:"max_tokens,omitempty"`
	InputTokens   string            `json:"input_tokens,omitempty"`
	OutputTokens  string            `json:"output_tokens,omitempty"`
	ExtraBody     string            `json:"extra_body,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Seed          uint64            `json:"seed"`
	Label         string            `json:"label,omitempty"`
	IdleTimeout   string            `json:"idle_timeout"`
	HTTP2         bool              `json:"http2,omitempty"`
	Goodput       string            `json:"goodput,omitempty"`
	Scrape        string            `json:"scrape,omitempty"`
	MonthlyTokens float64           `json:"monthly_tokens,omitempty"`
	// The replayed trace (--trace): its file, format, speed and window.
	Trace       string  `json:"trace,omitempty"`
	TraceFormat string  `json:"trace_format,omitempty"`
	TraceSpeed  float64 `json:"trace_speed,omitempty"`
	TraceWindow string  `json:"trace_window,omitempty"`
	// Multi-turn sessions (--sessions): their count, turns, think time,
	// identity mode and system prompt length.
	Sessions     int    `json:"sessions,omitempty"`
	Turns        int    `json:"turns,omitempty"`
	ThinkTime    string `json:"think_time,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	SystemTokens int    `json:"system_tokens,omitempty"`
	Transport    string `json:"transport,omitempty"`
}

// RunResult is one benchmark point: one model at one load.
type RunResult struct {
	Label         string  `json:"label"`
	Model         string  `json:"model"`
	BaseURL       string  `json:"base_url"`
	API           string  `json:"api"` // the client API the load spoke: chat, messages or responses
	Concurrency   int     `json:"concurrency"`
	RequestedRate float64 `json:"requested_rate"`
	// AchievedRate is the open loop's sending rate: (sent requests − 1) /
	// (last send − first send). A closed loop has none (0, left out of the
	// JSON): its rate is RequestsPerS.
	AchievedRate float64 `json:"achieved_rate,omitempty"`
	DurationS    float64 `json:"duration_s"`

	Requests    int `json:"requests"`
	Succeeded   int `json:"succeeded"`
	Failed      int `json:"failed"`
	Interrupted int `json:"interrupted"`
	// Incomplete counts requests cancelled by the end of the run (Ctrl-C or
	// the --duration grace period); they are not in Requests.
	Incomplete int `json:"incomplete"`

	TTFT   Dist   `json:"ttft_ms"`
	ITL    Dist   `json:"itl_ms"`
	MaxGap Dist   `json:"max_gap_ms"`
	TPOT   Dist   `json:"tpot_ms"`
	E2E    Dist   `json:"e2e_ms"`
	TPS    Dist   `json:"tps"`
	Tokens Dist   `json:"output_tokens_per_request"`
	Chunks int    `json:"chunks"`
	OutTok int    `json:"output_tokens"`
	InTok  int    `json:"input_tokens"`
	TokSrc string `json:"token_source"`
	// CacheReadTok and CacheWriteTok are the parts of InTok the endpoint
	// reported read from and written to a prompt cache, billed at the
	// price's cached_input and cache_write.
	CacheReadTok  int `json:"cache_read_tokens"`
	CacheWriteTok int `json:"cache_write_tokens"`

	Throughput float64 `json:"throughput_tokens_per_s"`
	// RequestsPerS is successful requests over the run's duration.
	RequestsPerS float64        `json:"requests_per_s"`
	CostUSD      float64        `json:"cost_usd"`
	MonthlyCost  float64        `json:"monthly_cost_usd,omitempty"`
	Errors       map[string]int `json:"errors"`
	ScheduleLag  *Dist          `json:"schedule_lag_ms,omitempty"`
	// DoneToEnd is the time from a stream's terminal event ("[DONE]") to
	// the end of its body, over the streams that ended so: what the
	// server held a complete answer open for (its own bookkeeping at the
	// end of a request). Absent when no stream was measured.
	DoneToEnd *Dist `json:"done_to_end_ms,omitempty"`
	// Trace is a trace replay's schedule and its recorded-vs-achieved
	// token counts, Sessions a session run's figures; CacheReadShare is
	// then CacheReadTok / InTok.
	Trace          *TraceStats   `json:"trace,omitempty"`
	Sessions       *SessionStats `json:"sessions,omitempty"`
	CacheReadShare *float64      `json:"cache_read_share,omitempty"`
	SlotWait       *Dist         `json:"slot_wait_ms,omitempty"`
	Goodput        *Goodput      `json:"goodput,omitempty"`
	Server         *ServerStats  `json:"server,omitempty"`
	Client         ClientStats   `json:"client"`
	Warnings       []string      `json:"warnings,omitempty"`

	// Repeats is the number of pooled repeats (RunOptions.Runs); Spread
	// holds the median and range over them of key figures (ttft_p50, itl_p99, ...).
	Repeats int               `json:"repeats,omitempty"`
	Spread  map[string]Spread `json:"spread,omitempty"`

	// HedgeIdeal is what an ideal hedge would give, from an unhedged run
	// (--hedge-ideal-from), with this run's ratio to it.
	HedgeIdeal *HedgeIdeal `json:"hedge_ideal,omitempty"`

	// Records holds every measured request when Config.KeepRequests is set.
	Records []*Request `json:"-"`
}

// Spread is a figure's median and range over repeated runs.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Goodput is the share of requests that met every SLO; errors count as misses.
type Goodput struct {
	Fraction float64 `json:"fraction"`
	PerS     float64 `json:"per_s"`
	SLO      string  `json:"slo"`
}

// ServerStats are the server's own figures for the run, read from its
// Prometheus endpoint before and after. Each covers the run's window (the
// growth of a histogram or counter between the two scrapes) or is not
// measured: nil, null in the JSON. A summary quantile, which covers a recent
// window of its own, is never used.
type ServerStats struct {
	// GCPauseMaxMs is the upper bound of the highest bucket of the GC pause
	// histogram that grew during the run (0: no pause).
	GCPauseMaxMs *float64 `json:"gc_pause_max_ms"`
	// GCCycles is the growth of the GC cycle counter during the run.
	GCCycles *float64 `json:"gc_cycles"`
	// OverheadMs is the gateway's mean added time per stage ("request",
	// "chunk") during the run; stages without observations are absent.
	OverheadMs map[string]float64 `json:"overhead_mean_ms,omitempty"`
}

// ClientStats is the client's self-check: if these figures are large, the
// client itself skewed the measurement.
type ClientStats struct {
	GCPauseMaxMs  float64 `json:"gc_pause_max_ms"`
	GCCycles      uint64  `json:"gc_cycles"`
	SchedLagP99Ms float64 `json:"sched_lag_p99_ms"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUUsPerChunk float64 `json:"cpu_us_per_chunk"`
	// MeasurementDelay is arrival − the server's "sent_ns" stamp, present
	// only against a stamping server (streamgate sim --stamp).
	MeasurementDelay *Dist `json:"measurement_delay_ms,omitempty"`
}

// sensitiveHeader reports headers whose values are secrets.
func sensitiveHeader(k string) bool {
	k = strings.ToLower(k)
	return strings.Contains(k, "auth") || strings.Contains(k, "key") || strings.Contains(k, "token") || strings.Contains(k, "cookie")
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
