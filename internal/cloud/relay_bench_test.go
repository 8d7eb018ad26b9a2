package cloud_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/cloud"
	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
)

// The relayed benchmarks serve a whole Claude stream through the gateway's
// handler, as a client gets it, from an in-memory upstream: once as
// Anthropic frames it (kind anthropic: SSE) and once as Bedrock does (kind
// bedrock's Claude path: SigV4 on the request, event-stream frames whose
// chunks carry each Anthropic event in base64). Everything the gateway
// does per request and per chunk is in them (auth, routing, the adapter,
// the relay, the client's encoder, metrics, the usage entry) except the
// sockets; the difference between the two is what Bedrock's framing costs
// a relayed chunk.

func relayedGateway(b *testing.B, p provider.Provider, kind string) *gateway.Gateway {
	pc := config.Provider{Name: "up", Kind: kind, BaseURL: "http://upstream.invalid"}
	model := "claude-sonnet-4-5"
	if kind == "bedrock" {
		pc.Region, pc.BaseURL, model = "us-east-1", "", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
		pc.AWS = &config.AWSKeys{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}
	}
	cfg := &config.Config{
		Timeouts:  config.Timeouts{Connect: config.Duration(time.Second), FirstToken: config.Duration(30 * time.Second), Idle: config.Duration(30 * time.Second)},
		Providers: []config.Provider{pc},
		Keys:      []config.Key{{Name: "bench", Key: "sg-bench-0123456789abcdef"}},
		Models:    []config.Model{{Name: "m", Routes: []config.Route{{Provider: "up", Model: model}}, Price: config.Price{Input: 3, Output: 15}}},
	}
	gw, err := gateway.New(gateway.Options{Config: cfg, KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Providers: map[string]provider.Provider{"up": p}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Close() })
	return gw
}

// discard is a ResponseWriter that keeps the status only.
type discard struct {
	h      http.Header
	status int
}

func (w *discard) Header() http.Header         { return w.h }
func (w *discard) Write(p []byte) (int, error) { return len(p), nil }
func (w *discard) WriteHeader(s int)           { w.status = s }
func (w *discard) Flush()                      {}

// benchRelayed serves one whole stream per iteration to a client of the
// dialect (chat: /v1/chat/completions, translated; messages: /v1/messages,
// passed through).
func benchRelayed(b *testing.B, gw *gateway.Gateway, client string, events int) {
	path, body := "/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"Write a haiku about latency."}]}`
	if client == "messages" {
		path, body = "/v1/messages", `{"model":"m","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"Write a haiku about latency."}]}`
	}
	req, _ := http.NewRequest(http.MethodPost, "http://gw"+path, nil)
	req.Header.Set("Authorization", "Bearer sg-bench-0123456789abcdef")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	rd := bytes.NewReader([]byte(body))
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rd.Reset([]byte(body))
		req.Body = io.NopCloser(rd)
		clear(w.h)
		w.status = 0
		gw.ServeHTTP(w, req)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
}

func anthropicKind(n int) provider.Provider {
	return anthropic.New("http://upstream.invalid", "k", anthropic.Options{Transport: cloud.Canned(cloud.SSEBody(cloud.AnthropicEvents(n)), "text/event-stream")})
}

func bedrockKind(n int) provider.Provider {
	return anthropic.New("http://upstream.invalid", "", anthropic.Options{Transport: &cloud.Bedrock{
		Base: cloud.Canned(cloud.FrameBody(cloud.AnthropicEvents(n)), "application/vnd.amazon.eventstream"), Endpoint: "https://bedrock-runtime.us-east-1.amazonaws.com",
		Signer: &cloudauth.SigV4{Service: "bedrock", Region: "us-east-1", Creds: cloudauth.AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}}}})
}

// relayed runs the four client × kind benchmarks of an n-delta stream.
func relayed(b *testing.B, kind, client string, n int) {
	p := anthropicKind(n)
	if kind == "bedrock" {
		p = bedrockKind(n)
	}
	benchRelayed(b, relayedGateway(b, p, kind), client, n+5)
}

// BenchmarkRelayedAnthropic and BenchmarkRelayedBedrock: a Claude stream
// of 100 text deltas (105 events), and of 1 (6 events), relayed to a chat
// client (translated to OpenAI chunks) and to a /v1/messages client
// (passed through). The cost of one more relayed chunk is the difference
// of the two streams' ns/op over 99; the 1-delta stream is the cost of a
// request (for Bedrock: SigV4 and the Invoke rewrite included).
func BenchmarkRelayedAnthropic(b *testing.B) { relayedAll(b, "anthropic") }
func BenchmarkRelayedBedrock(b *testing.B)   { relayedAll(b, "bedrock") }

func relayedAll(b *testing.B, kind string) {
	for _, client := range []string{"chat", "messages"} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/deltas=%d", client, n), func(b *testing.B) { relayed(b, kind, client, n) })
		}
	}
}
