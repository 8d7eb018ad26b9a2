package cloud

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/eventstream"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
)

// cannedRT answers every request with the same body, in memory: the
// benchmarks measure the adapter and the framing, not a network.
type cannedRT struct {
	body []byte
	ct   string
}

func (c cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {c.ct}}, Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
}

// anthropicEvents is a Messages stream of n text deltas.
func anthropicEvents(n int) []string {
	evs := []string{`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`}
	for i := range n {
		evs = append(evs, fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word%d"}}`, i%10))
	}
	return append(evs, `{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":100}}`,
		`{"type":"message_stop"}`)
}

func sseBody(evs []string) []byte {
	var b bytes.Buffer
	for _, e := range evs {
		typ := eventType([]byte(e))
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, e)
	}
	return b.Bytes()
}

func frameBody(evs []string) []byte {
	var b []byte
	for _, e := range evs {
		b, _ = eventstream.AppendMessage(b, []eventstream.Header{
			eventstream.StringHeader(":event-type", "chunk"), eventstream.StringHeader(":content-type", "application/json"),
			eventstream.StringHeader(":message-type", "event"),
		}, []byte(`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(e))+`","p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"}`))
	}
	return b
}

// benchStream opens and reads a 100-delta stream through the anthropic
// adapter over rt: b.N streams, reported per relayed chunk.
func benchStream(b *testing.B, rt http.RoundTripper) {
	c := anthropic.New("http://upstream", "k", anthropic.Options{Transport: rt})
	req := chatRequest(&testing.T{}, "anthropic.claude-3-haiku-20240307-v1:0", true)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := c.Open(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := st.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
		st.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/105, "ns/chunk")
}

// BenchmarkAnthropicStream and BenchmarkBedrockStream: the same Claude
// stream through the anthropic adapter, as Anthropic frames it (SSE) and as
// Bedrock does (event-stream frames, base64 bytes, SigV4 on the request).
func BenchmarkAnthropicStream(b *testing.B) {
	benchStream(b, cannedRT{body: sseBody(anthropicEvents(100)), ct: "text/event-stream"})
}

func BenchmarkBedrockStream(b *testing.B) {
	benchStream(b, &Bedrock{Base: cannedRT{body: frameBody(anthropicEvents(100)), ct: "application/vnd.amazon.eventstream"}, Endpoint: "http://upstream",
		Signer: &cloudauthSigner})
}

var cloudauthSigner = cloudauth.SigV4{Service: "bedrock", Region: "us-east-1", Creds: cloudauth.AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}}
