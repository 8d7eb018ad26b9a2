// Package sim is the simulated upstream: one server speaking the OpenAI,
// Anthropic and Gemini dialects on one port, whose latency, output and
// faults follow a model profile, so the gateway and the benchmark run and
// are tested offline. Tokens are paced against absolute deadlines so the
// stream does not drift. One engine plans, paces and injects faults for
// every dialect; a dialect only encodes the engine's events (start, text,
// tool-call arguments, finish with usage, error, malformed line).
//
// Endpoints:
//
//	POST /v1/chat/completions                 OpenAI Chat Completions, stream and not
//	POST /v1/messages                         Anthropic Messages, stream and not
//	POST /v1/messages/count_tokens            Anthropic token count of a Messages body
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//	POST /v1beta/models/{model}:countTokens   Gemini API
//	POST /v1/embeddings                       OpenAI embeddings
//	GET  /v1/models                           the profiles, OpenAI list format
//	GET  /metrics                             Prometheus, the Server's own registry
//
// Any model name is answered: a name matching a profile uses it, others use
// Options.Profile. The response echoes the requested model name. Auth
// headers (Authorization, x-api-key, x-goog-api-key) are accepted whatever
// their value: the key only owns a prompt cache (see Prompt caching).
// anthropic-version and anthropic-beta are accepted and ignored.
//
// An OpenAI stream: the HTTP headers at once, then at the first token a
// role-only chunk (delta {"role":"assistant","content":""}), content
// chunks, a chunk with an empty delta and finish_reason ("length" when
// max_tokens / max_completion_tokens cut the output, else "stop"), a usage
// chunk (choices [], usage with prompt_tokens_details.cached_tokens and
// completion_tokens_details.reasoning_tokens) only with
// stream_options.include_usage (every chunk then carries "usage":null),
// and data: [DONE].
//
// An Anthropic stream (max_tokens is required, as by the API): event:
// message_start (usage: input_tokens, cache_creation_input_tokens,
// cache_read_input_tokens, cache_creation {ephemeral_5m_input_tokens,
// ephemeral_1h_input_tokens}, output_tokens 1, service_tier),
// content_block_start, ping, one content_block_delta (text_delta) per
// content chunk, content_block_stop, message_delta (stop_reason end_turn or
// max_tokens, cumulative usage: the input and cache counts again,
// output_tokens, output_tokens_details.thinking_tokens with thinking),
// message_stop; with thinking a thinking block comes first (see Thinking).
// Every event has its event: line and a data: object with the same "type". Errors are {"type":"error","error":
// {"type","message"}} with the type of the status (429 rate_limit_error,
// 529 overloaded_error, 500 api_error, 400 invalid_request_error...).
//
// A Gemini stream (alt=sse): data: lines of GenerateContentResponse, no
// [DONE]: candidates[0].content {role model, parts [{text}]}, usageMetadata
// with cumulative promptTokenCount, candidatesTokenCount, totalTokenCount
// (and cachedContentTokenCount, thoughtsTokenCount when not 0) on every
// chunk, modelVersion, responseId; a last chunk with an empty text part
// has finishReason STOP or MAX_TOKENS (generationConfig.maxOutputTokens).
// Errors are {"error":{"code","message","status"}} (429 RESOURCE_EXHAUSTED,
// 503 UNAVAILABLE, 500 INTERNAL, 400 INVALID_ARGUMENT...).
//
// In every dialect the first events leave together with the first content
// chunk, and the usage's completion tokens are exactly the tokens sent,
// thinking included (also thinking that is not shown). Queue waits
// (Options.MaxConcurrency) come before the TTFT, so a client sees them as
// part of its TTFT.
//
// Tokens per event: a profile's TokensPerChunk, or when it sets none the
// provider's own event size: OpenAI 1 token per chunk, Anthropic 4 per
// text_delta (DefaultAnthropicTokensPerChunk: a few words, as Claude's
// events carry), Gemini 16 per GenerateContentResponse
// (DefaultGeminiTokensPerChunk: a phrase or a sentence), each chunk then
// coming TokensPerChunk gaps (ITL) after the previous one, so the token
// rate is the profile's in every dialect.
//
// Thinking. Anthropic: thinking {type enabled, budget_tokens N} or
// {type adaptive} makes the answer think first, Profile.ThinkingTokens
// tokens (64 unless set; X-Sim-Thinking-Tokens) capped by the budget: the
// stream opens a thinking block (content_block_start {type thinking,
// thinking "", signature ""}), sends thinking_delta events, one
// signature_delta and content_block_stop, then the text or tool_use block
// at index 1; a non-stream answer has the thinking block with its
// signature first. display "omitted" sends the block with an empty text
// and its signature; X-Sim-Redacted-Thinking: true sends a
// redacted_thinking block (content_block_start with its data, then
// content_block_stop) instead. Thinking tokens are output tokens (and
// output_tokens_details.thinking_tokens); max_tokens bounds thinking and
// answer together. The signature is base64 of an HMAC-SHA256 of the
// thinking text under Options.ThinkingKey, redacted data base64 of a nonce
// and its HMAC: the sim verifies what it issued without state. As
// Anthropic, it answers 400 invalid_request_error to: budget_tokens below
// 1024 or not below max_tokens; a thinking block passed back without its
// signature ("messages.N.content.M.thinking.signature: Field required"),
// with a signature that is not its text's ("messages.N.content.M: Invalid
// `signature` in `thinking` block") or a redacted_thinking block whose
// data the sim did not issue; thinking enabled and the assistant message
// after the last user message that is not only tool results (a prefill,
// a tool loop's first step) not starting with a thinking or
// redacted_thinking block ("Expected `thinking` or `redacted_thinking`,
// but found ..."), so no prefill with thinking; thinking in a final
// assistant message without thinking on; a final assistant message ending
// in a thinking block; thinking with tool_choice any or tool, or with a
// temperature other than 1. OpenAI: reasoning_effort (minimal, low,
// medium, high, xhigh; none is off) or a Profile.Reasoning profile thinks
// ThinkingTokens scaled by the effort (×1/4, ×1/2, ×1, ×2, ×4), reported
// only as completion_tokens_details.reasoning_tokens within
// completion_tokens, as OpenAI's chat completions do. Gemini:
// generationConfig.thinkingConfig (thinkingBudget: 0 off, -1 dynamic, N a
// cap; thinkingLevel; includeThoughts) or a Reasoning profile thinks:
// thoughtsTokenCount in usageMetadata (not in candidatesTokenCount, in
// totalTokenCount), thought parts ({"text":...,"thought":true}) streamed
// first with includeThoughts, and a thoughtSignature on the function call
// part or else on the last part. Thinking that is not streamed delays the
// first content by the gaps its chunks would have taken. The thinking text
// has its own generator: the answer's text is the same with or without.
//
// Prompt caching, per API key (x-api-key, x-goog-api-key, the bearer token,
// Gemini's key parameter; "" without one), model and dialect, in memory
// (Options.PromptCacheEntries, least recently used first out). A prompt is
// read as canonical bytes (JSON re-encoded: key order and white space do
// not matter, any content does; cache_control markers are not content) in
// the provider's order, counted with the sim's token estimate; the 3
// tokens every request adds come last and are never cached. Anthropic:
// tools, system, then messages, block by block; each cache_control
// breakpoint (at most 4; ttl "5m" or "1h", longer first; a top-level
// cache_control puts one on the last block) whose prefix has at least
// Profile.CacheMinTokens tokens (1024, Anthropic's minimum for Sonnet and
// Opus) is looked up, also at the 20 block boundaries before it: the
// longest prefix seen within its lifetime (5 minutes, or an hour with ttl
// "1h", refreshed by each hit) is cache_read_input_tokens; the rest up to
// the last breakpoint is cache_creation_input_tokens, split by the ttl of
// the breakpoint ending each part; input_tokens is what follows. Changing
// the thinking settings (on or off, the budget) misses the cached messages
// but not tools and system, as at Anthropic. OpenAI:
// automatic, from CacheMinTokens tokens in steps of 128: the longest
// prefix an earlier request had within 5 minutes is
// prompt_tokens_details.cached_tokens (within prompt_tokens); the Responses
// API the same (tools, instructions, then the input items), as
// input_tokens_details.cached_tokens. Gemini:
// implicit, the same rule, reported as cachedContentTokenCount (within
// promptTokenCount). Cached tokens take no prefill time.
//
// Randomness has a seed part: X-Sim-Seed if given, else the request's seed
// field (OpenAI "seed", Gemini generationConfig.seed) mixed with
// Options.Seed, else Options.Seed alone. The text is a pure function of the
// seed part, the prompt and the language: its generator is seeded by the
// seed part mixed with an FNV-1a hash of the conversation's text (the
// system text, then each message's text pieces in order; roles, tool
// calls, tool results and a trailing assistant prefix left out), so one
// conversation gets one text on every request and in every dialect.
// Timing and faults come from the per-request key: the seed part when a
// seed is given, else Options.Seed mixed with a request counter, so fault
// rates hit different requests and timings vary.
//
// Continuation: a trailing assistant message (OpenAI: role assistant with
// text content and no tool_calls; Anthropic: the prefill; Gemini: a last
// model turn of text parts) is a prefix P that the answer continues, as
// a gateway sends the text a cut stream delivered to another target. When P
// is a beginning of the text T = t0 t1 ... the conversation without P gets
// (the most whole tokens t0..t(k-1) it holds, then possibly a proper
// beginning r of t_k), the answer is the rest of T: t_k, or its rest after
// r in the first content chunk, then t(k+1)..., so P followed by the answer
// is the uninterrupted text byte for byte. The answer has at most Tokens-k
// tokens and at most the request's max_tokens (stop reason length /
// max_tokens / MAX_TOKENS when that cut it short); the prompt tokens count
// P, the completion tokens what is sent, and chunks count from the
// continuation's start. The sim cannot continue text it did not write: any
// other P is ignored for matching and the answer starts from the beginning
// of T, which a client sees as repeated text. As Anthropic's API does, the
// Anthropic dialect answers a final assistant message ending in white space
// with 400 invalid_request_error ("final assistant content cannot end with
// trailing whitespace"). Tool calls ignore P; faults hit continuations as
// any request.
//
// Tool calls: when the request offers tools (OpenAI tools[].function,
// Anthropic tools[], Gemini tools[].functionDeclarations) and X-Sim-Tool-Call
// names one, the answer is one call of it instead of text: its arguments
// are an object of the tool's schema properties with placeholder values
// ({} without properties), streamed in fragments of Tokens-Per-Chunk
// pieces (OpenAI: a role chunk with the call's index, id and name, then
// tool_calls argument deltas, finish_reason tool_calls; Anthropic: a
// tool_use block with input_json_delta partial_json fragments, stop_reason
// tool_use; Gemini: one functionCall part, finishReason STOP). The output
// limit does not cut a tool call. Without the header the answer is text.
//
// Request headers override the chosen profile for one request; a bad value
// is answered 400 in the dialect's error shape, naming the header (OpenAI:
// also in param):
//
//	X-Sim-Profile            profile name to use whatever the model
//	X-Sim-TTFT               median TTFT, Go duration (250ms)
//	X-Sim-TTFT-P99           p99 TTFT (lognormal); = median means constant
//	X-Sim-ITL                mean gap between content chunks
//	X-Sim-ITL-Jitter         relative std-dev of a gap, 0..10 (0 constant)
//	X-Sim-Prefill-Per-Token  added to TTFT per estimated prompt token
//	X-Sim-Tokens             output length when max_tokens allows
//	X-Sim-Tokens-Per-Chunk   tokens per content chunk (>= 1)
//	X-Sim-Lang               en | ko
//	X-Sim-Seed               int64 seed part of this request's randomness
//	X-Sim-Tool-Call          answer with one call of this offered tool
//	X-Sim-Thinking-Tokens    tokens of a thinking phase (when there is one)
//	X-Sim-Redacted-Thinking  true: Anthropic thinking as a redacted_thinking block
//	X-Sim-Fail-Status        answer this status (400-599) before the stream
//	X-Sim-Stall-First        stall before the first event (no role chunk)
//	X-Sim-Stall-At, X-Sim-Stall-For  stall before content chunk N for D
//	X-Sim-Cut-At             close the connection before content chunk N
//	X-Sim-Error-At           an error event before chunk N, then end
//	X-Sim-Malformed-At       a non-JSON data: line before chunk N, stream goes on
//	X-Sim-Fail-Rate, X-Sim-Stall-First-Rate, X-Sim-Stall-Rate, X-Sim-Cut-Rate,
//	X-Sim-Error-Rate, X-Sim-Malformed-Rate   fraction 0..1 of requests hit
//
// A fault header without its rate header hits this request; a rate of 0
// switches the profile's fault off; a rate alone uses the default value (503,
// 10s, a random chunk). Chunks count content chunks from 1 (see Faults).
// Faults are the same in every dialect, in its own shape: fail-status
// answers the dialect's error body; the error event is OpenAI's data:
// {"error":...}, Anthropic's event: error with overloaded_error, Gemini's
// data: {"error":{...,"status":"UNAVAILABLE"}}; a cut stream lacks [DONE],
// message_stop or finishReason. There are no heartbeats (Anthropic pings
// during waits): a stall is silent in every dialect, so idle timeouts see
// the same thing. Non-stream requests take the whole stream's time, then
// answer; cut closes the connection, error-at answers OpenAI 500, Anthropic
// 529 overloaded_error, Gemini 503 UNAVAILABLE; malformed sends a
// truncated body.
package sim

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/cloudauth"
)

// Options configure a simulated upstream. The zero value serves
// DefaultProfile for unknown models and the built-in Profiles by name.
type Options struct {
	// Profile is used for models without a profile of their own. The zero
	// Profile means DefaultProfile().
	Profile Profile
	// Profiles are selected by model name (and by X-Sim-Profile). nil means
	// the built-in Profiles(); an empty non-nil slice means none.
	Profiles []Profile
	// Stamp writes ": sent_ns=<unix ns>" right before each event, in every
	// dialect. SSE readers skip comment lines, but go-genai's stream decoder
	// does not (it reports "invalid stream chunk"): a Gemini client on
	// go-genai needs a sim without Stamp.
	Stamp bool
	// Seed is the root of all randomness: with the same seed one
	// conversation gets the same text on every request, and the same
	// sequence of requests the same timings and faults.
	Seed int64
	// MaxConcurrency bounds requests served at once; more wait in a FIFO
	// queue. 0 = unlimited.
	MaxConcurrency int
	// ShutdownGrace is how long Serve lets open streams finish after its
	// context ends before closing them. 0 means 5s.
	ShutdownGrace time.Duration
	// TLS, when set, makes Serve speak TLS (HTTP/2 and HTTP/1.1 by ALPN)
	// instead of cleartext HTTP/1.1 and h2c.
	TLS *TLS
	// ThinkingKey signs the thinking blocks the Anthropic dialect sends and
	// verifies those passed back. Empty means a built-in key, the same in
	// every sim, so a signature one sim issued is valid at another (as at
	// one provider); sims with different keys refuse each other's.
	ThinkingKey []byte
	// PromptCacheEntries bounds the prompt cache (prefixes kept for all API
	// keys together; the least recently used goes first). 0 means
	// DefaultPromptCacheEntries.
	PromptCacheEntries int
	// AWSCredentials are the AWS keys the Bedrock endpoints verify SigV4
	// signatures against; none means SimAWSCredentials. A bearer token
	// (a Bedrock API key) is accepted whatever it is.
	AWSCredentials []cloudauth.AWSCredentials
	// GoogleKeys are the service-account public keys whose JWT-bearer
	// grants the token endpoint (/token) accepts, for Vertex AI's paths.
	GoogleKeys []*rsa.PublicKey
	// EntraApps are the Microsoft Entra ID app registrations (client id →
	// client secret) whose client-credentials grants the token endpoint
	// (/{tenant}/oauth2/v2.0/token) accepts, for Azure's bearer tokens;
	// nil means SimEntraApps.
	EntraApps map[string]string
}

// Endpoints lists what the simulator serves, for messages and help texts.
const Endpoints = "the simulator serves POST /v1/chat/completions (OpenAI), POST /v1/messages and " +
	"/v1/messages/count_tokens (Anthropic), POST /v1beta/models/{model}:generateContent, " +
	":streamGenerateContent?alt=sse and :countTokens (Gemini), POST /v1/embeddings, GET /v1/models, GET /metrics"

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 10 << 20

// Server is the simulator. It is an http.Handler; it holds no goroutines of
// its own, so there is nothing to close: streams end with their requests.
type Server struct {
	opts     Options
	def      Profile
	byName   map[string]Profile
	models   []string
	queue    *fifo
	reg      *prometheus.Registry
	m        *metrics
	mux      *http.ServeMux
	counter  atomic.Uint64
	created  int64
	handlers sync.WaitGroup
	cache    *promptCache
	signer   signer
	gtokens  vertexTokens
	etokens  vertexTokens // Entra ID tokens, for Azure
}

var _ http.Handler = (*Server)(nil)

// New returns a simulator serving opts. It does not validate the profiles
// (see Profile.Validate); out-of-range values are taken as their defaults.
func New(opts Options) *Server {
	s := &Server{
		opts:    opts,
		def:     opts.Profile,
		byName:  map[string]Profile{},
		queue:   newFIFO(opts.MaxConcurrency),
		reg:     prometheus.NewRegistry(),
		created: time.Now().Unix(),
		cache:   newPromptCache(opts.PromptCacheEntries),
		signer:  newSigner(opts.ThinkingKey),
	}
	if s.def == (Profile{}) {
		s.def = DefaultProfile()
	}
	s.def = s.def.normalize()
	profiles := opts.Profiles
	if profiles == nil {
		profiles = Profiles()
	}
	for _, p := range profiles {
		if _, dup := s.byName[p.Name]; !dup {
			s.models = append(s.models, p.Name)
		}
		s.byName[p.Name] = p.normalize()
	}
	if _, ok := s.byName[s.def.Name]; !ok && s.def.Name != "" {
		s.models = append(s.models, s.def.Name)
	}
	sort.Strings(s.models)
	s.m = newMetrics(s.reg)
	s.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "streamgate_sim_queued_requests",
		Help: "Requests waiting for a slot (max concurrency).",
	}, func() float64 { return float64(s.queue.waiting()) }))

	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/v1/chat/completions", s.chat)
	s.mux.HandleFunc("/v1/responses", s.responses)
	s.mux.HandleFunc("/v1/messages", s.messages(false))
	s.mux.HandleFunc("/v1/messages/count_tokens", s.messages(true))
	s.mux.HandleFunc("/v1beta/models/", s.geminiModels)
	s.mux.HandleFunc("/v1beta/models", s.geminiList)
	s.mux.HandleFunc("/v1/embeddings", s.embeddings)
	s.mux.HandleFunc("/v1/models", s.listModels)
	s.mux.HandleFunc("/model/", s.bedrockInvoke)
	s.mux.HandleFunc("/token", s.googleToken)
	s.mux.HandleFunc("/v1/projects/", s.vertexModels)
	s.mux.HandleFunc("/openai/", s.azure)
	s.mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token") && strings.Count(r.URL.Path, "/") == 4 {
			s.entraToken(w, r)
			return
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", "unknown path "+r.URL.Path+" ("+Endpoints+")")
	})
	return s
}

// Registry returns the Server's Prometheus registry (served at /metrics).
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// ServeHTTP serves the simulator's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	s.mux.ServeHTTP(w, r)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, lets open streams finish for Options.ShutdownGrace, closes the
// rest and waits for their handlers. It returns nil after a shutdown caused
// by ctx, or the error that stopped serving. It speaks HTTP/1.1 and, on the
// same port, HTTP/2 cleartext with prior knowledge (h2c: a client that opens
// with the HTTP/2 preface); every event is flushed either way. With
// Options.TLS it speaks TLS instead, HTTP/2 or HTTP/1.1 as ALPN agrees.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var protos http.Protocols
	protos.SetHTTP1(true)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, Protocols: &protos,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.m.conns.Inc()
			}
		}}
	if t := s.opts.TLS; t != nil {
		cfg, err := t.config(s.m)
		if err != nil {
			return err
		}
		protos.SetHTTP2(slices.Contains(cfg.NextProtos, "h2"))
		srv.TLSConfig = cfg
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	grace := s.opts.ShutdownGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // cancels the streams still open
	}
	s.handlers.Wait()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			"method "+r.Method+" not allowed on /v1/models")
		return
	}
	if r.Header.Get("Anthropic-Version") != "" {
		s.anthropicList(w)
		return
	}
	list := api.ModelList{Object: "list", Data: make([]api.Model, 0, len(s.models))}
	for _, name := range s.models {
		list.Data = append(list.Data, api.Model{ID: name, Object: "model", Created: s.created, OwnedBy: "streamgate-sim"})
	}
	writeJSON(w, http.StatusOK, list)
}

// anthropicList is GET /v1/models as Anthropic answers it (a request with
// anthropic-version): models of type "model", one page.
func (s *Server) anthropicList(w http.ResponseWriter) {
	type model struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	out := struct {
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{Data: make([]model, 0, len(s.models))}
	created := time.Unix(s.created, 0).UTC().Format(time.RFC3339)
	for _, name := range s.models {
		out.Data = append(out.Data, model{Type: "model", ID: name, DisplayName: name, CreatedAt: created})
	}
	if n := len(out.Data); n > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// profileFor returns the profile of a model name.
func (s *Server) profileFor(model string) Profile {
	if p, ok := s.byName[model]; ok {
		return p
	}
	return s.def
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"sim: encoding the response failed","type":"server_error","code":null,"param":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	writeJSON(w, status, api.NewError(typ, code, param, msg))
}
