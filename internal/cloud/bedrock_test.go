package cloud

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/streamgate/streamgate/internal/eventstream"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/sim"
	"github.com/streamgate/streamgate/internal/sse"
)

// bedrockSim serves the simulator's Bedrock endpoints on loopback.
func bedrockSim(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(sim.New(sim.Options{Seed: 7, Profile: sim.Profile{Name: "fast", TTFT: 1e6, ITL: 1e5, Tokens: 20}}))
	t.Cleanup(srv.Close)
	return srv
}

func bedrockClient(srv *httptest.Server, creds cloudauth.AWSCredentials, apiKey string) *anthropic.Client {
	b := &Bedrock{Base: srv.Client().Transport, Endpoint: srv.URL, APIKey: apiKey}
	if apiKey == "" {
		b.Signer = &cloudauth.SigV4{Service: "bedrock", Region: "us-east-1", Creds: creds}
	}
	return anthropic.New(srv.URL, "", anthropic.Options{Transport: b})
}

func chatRequest(t *testing.T, model string, stream bool) *provider.Request {
	body := `{"model":"x","max_tokens":20,"messages":[{"role":"user","content":"say hello"}]}`
	var chat api.ChatRequest
	if err := json.Unmarshal([]byte(body), &chat); err != nil {
		t.Fatal(err)
	}
	return &provider.Request{Model: model, Stream: stream, Body: []byte(body), Chat: &chat}
}

// readStream gathers a stream's text and usage.
func readStream(t *testing.T, st provider.Stream) (string, *api.Usage, error) {
	defer st.Close()
	var text strings.Builder
	var usage *api.Usage
	for {
		ev, err := st.Next()
		if err == io.EOF {
			return text.String(), usage, nil
		}
		if err != nil {
			return text.String(), usage, err
		}
		if len(ev.Data) == 0 {
			continue // a comment
		}
		var c api.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("chunk %q: %v", ev.Data, err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
	}
}

// TestBedrockClaudeStream: a chat request to Claude on (simulated)
// Bedrock, signed with SigV4 and with a Bedrock API key, for a model id, a
// cross-region profile and an ARN: the answer's text and usage arrive
// through the anthropic adapter, unwrapped from event-stream frames.
func TestBedrockClaudeStream(t *testing.T) {
	srv := bedrockSim(t)
	models := []string{
		"anthropic.claude-sonnet-4-5-20250929-v1:0",
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-opus-4-5-v1:0",
	}
	for _, auth := range []string{"sigv4", "api key"} {
		key := ""
		if auth == "api key" {
			key = "ABSKbedrockapikey"
		}
		c := bedrockClient(srv, sim.SimAWSCredentials, key)
		for _, m := range models {
			st, err := c.Open(context.Background(), chatRequest(t, m, true))
			if err != nil {
				t.Fatalf("%s %s: open: %v", auth, m, err)
			}
			text, usage, err := readStream(t, st)
			if err != nil || text == "" {
				t.Errorf("%s %s: got %q, %v; want text", auth, m, text, err)
			}
			if usage == nil || usage.PromptTokens == 0 || usage.CompletionTokens == 0 {
				t.Errorf("%s %s: usage %+v, want prompt and completion tokens", auth, m, usage)
			}
		}
		c.CloseIdleConnections()
	}
}

// TestBedrockNonStream: Invoke (not streamed) answers the Message as it
// is; the adapter translates it.
func TestBedrockNonStream(t *testing.T) {
	srv := bedrockSim(t)
	c := bedrockClient(srv, sim.SimAWSCredentials, "")
	defer c.CloseIdleConnections()
	b, err := c.Complete(context.Background(), chatRequest(t, "anthropic.claude-3-haiku-20240307-v1:0", false))
	if err != nil {
		t.Fatal(err)
	}
	var cc api.Completion
	if err := json.Unmarshal(b, &cc); err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content == "" {
		t.Errorf("got %s (%v), want a completion with text", b, err)
	}
}

// TestBedrockWrongSecret: a signature made with the wrong secret is
// refused 403 as AWS refuses it, and the adapter sees Anthropic's error
// shape with AWS's words.
func TestBedrockWrongSecret(t *testing.T) {
	srv := bedrockSim(t)
	bad := sim.SimAWSCredentials
	bad.SecretAccessKey = "wrong"
	c := bedrockClient(srv, bad, "")
	defer c.CloseIdleConnections()
	_, err := c.Open(context.Background(), chatRequest(t, "anthropic.claude-3-haiku-20240307-v1:0", true))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusForbidden || !strings.Contains(pe.Message, "signature") {
		t.Fatalf("got %v, want a 403 naming the signature", err)
	}
}

// TestBedrockMidStreamException: an error event mid-stream reaches Bedrock's
// client as an exception frame, and the adapter's client as an error, not a
// silent end.
func TestBedrockMidStreamException(t *testing.T) {
	srv := bedrockSim(t)
	c := bedrockClient(srv, sim.SimAWSCredentials, "")
	defer c.CloseIdleConnections()
	req := chatRequest(t, "anthropic.claude-3-haiku-20240307-v1:0", true)
	req.Header = http.Header{sim.HeaderErrorAt: {"3"}}
	st, err := c.Open(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := readStream(t, st)
	var pe *provider.Error
	if !errors.As(err, &pe) {
		t.Fatalf("got text %q and %v, want an upstream error mid-stream", text, err)
	}
}

// TestBedrockBody: what reaches Bedrock is the Anthropic body without
// model and stream, with Bedrock's anthropic_version and the client's betas
// as anthropic_beta, at the model's escaped path.
func TestBedrockBody(t *testing.T) {
	var got *http.Request
	var body []byte
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`))
	}))
	defer fake.Close()
	b := &Bedrock{Base: fake.Client().Transport, Endpoint: fake.URL, Signer: &cloudauth.SigV4{Service: "bedrock", Region: "eu-west-1", Creds: sim.SimAWSCredentials}}
	c := anthropic.New(fake.URL, "", anthropic.Options{Transport: b})
	defer c.CloseIdleConnections()
	native := []byte(`{"model":"claude","max_tokens":9,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`)
	req := &provider.Request{Model: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", Native: &provider.Native{
		Dialect: provider.DialectAnthropic, Body: native,
		Header: http.Header{"Anthropic-Beta": {"context-1m-2025-08-07,interleaved-thinking-2025-05-14"}, "Anthropic-Version": {"2023-06-01"}},
	}}
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got.URL.EscapedPath() != "/model/eu.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke" {
		t.Errorf("path: got %s", got.URL.EscapedPath())
	}
	if got.Header.Get("Anthropic-Beta") != "" || got.Header.Get("X-Api-Key") != "" || !strings.HasPrefix(got.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+sim.SimAWSCredentials.AccessKeyID+"/") {
		t.Errorf("headers: %v", got.Header)
	}
	var m map[string]json.RawMessage
	json.Unmarshal(body, &m)
	if _, ok := m["model"]; ok {
		t.Errorf("body keeps model: %s", body)
	}
	if string(m["anthropic_version"]) != `"bedrock-2023-05-31"` || string(m["anthropic_beta"]) != `["context-1m-2025-08-07","interleaved-thinking-2025-05-14"]` {
		t.Errorf("body: %s", body)
	}
	if !strings.Contains(string(body), `"cache_control":{"type":"ephemeral"}`) || !strings.Contains(string(body), `"thinking":{"type":"enabled","budget_tokens":1024}`) {
		t.Errorf("body lost the client's members: %s", body)
	}
}

// recordedException is a Bedrock InvokeModelWithResponseStream body that
// ended in a modelStreamErrorException frame, as recorded in the Vercel AI
// SDK's test fixtures (packages/amazon-bedrock/src/__fixtures__/
// model-stream-error-exception.eventstream.base64.txt, Apache-2.0).
const recordedException = "AAAA3QAAAGfHkZB6DTptZXNzYWdlLXR5cGUHAAlleGNlcHRpb24POmV4Y2VwdGlvbi10eXBlBwAZbW9kZWxTdHJlYW1FcnJvckV4Y2VwdGlvbg06Y29udGVudC10eXBlBwAQYXBwbGljYXRpb24vanNvbnsibWVzc2FnZSI6Ik1vZGVsIFN0cmVhbSBFcnJvciIsIm9yaWdpbmFsU3RhdHVzQ29kZSI6NTAwLCJvcmlnaW5hbE1lc3NhZ2UiOiJUaGUgbW9kZWwgc3RyZWFtIGZhaWxlZC4ifVczQxM="

// TestBedrockRecordedException: the recorded exception frame, after a
// message_start and some text, reaches the adapter's client as an upstream
// error naming Bedrock's message, after the text.
func TestBedrockRecordedException(t *testing.T) {
	exc, err := base64.StdEncoding.DecodeString(recordedException)
	if err != nil {
		t.Fatal(err)
	}
	chunk := func(ev string) []byte {
		b, _ := eventstream.AppendMessage(nil, []eventstream.Header{
			eventstream.StringHeader(":event-type", "chunk"), eventstream.StringHeader(":content-type", "application/json"),
			eventstream.StringHeader(":message-type", "event"),
		}, []byte(`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(ev))+`"}`))
		return b
	}
	var body []byte
	body = append(body, chunk(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)...)
	body = append(body, chunk(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)...)
	body = append(body, chunk(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)...)
	body = append(body, exc...)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Write(body)
	}))
	defer fake.Close()
	c := anthropic.New(fake.URL, "", anthropic.Options{Transport: &Bedrock{Base: fake.Client().Transport, Endpoint: fake.URL, APIKey: "k"}})
	defer c.CloseIdleConnections()
	st, err := c.Open(context.Background(), chatRequest(t, "anthropic.claude-3-haiku-20240307-v1:0", true))
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := readStream(t, st)
	var pe *provider.Error
	if text != "Hello" || !errors.As(err, &pe) || !strings.Contains(pe.Message, "Model Stream Error") {
		t.Errorf("got text %q and %v, want Hello then an error naming Model Stream Error", text, err)
	}
}

// countHook counts the reads it is told of.
type countHook struct{ n int }

func (c *countHook) BeforeRead() { c.n++ }

// TestFrameReaderModes: the same frames read as events (what the anthropic
// adapter reads, its hook told before each read of the body) and as SSE
// bytes (what anything else reading the body gets) carry the same events;
// a cut inside a frame is a truncation either way.
func TestFrameReaderModes(t *testing.T) {
	evs := anthropicEvents(3)
	body := frameBody(evs)
	f := newFrameReader(io.NopCloser(bytes.NewReader(body)))
	var hook countHook
	var got []string
	for {
		ev, err := f.NextEvent(&hook)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(ev.Name)+" "+string(ev.Data))
	}
	f.Close()
	var want []string
	for _, e := range evs {
		want = append(want, string(eventType([]byte(e)))+" "+e)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || hook.n == 0 {
		t.Errorf("events (%d reads told):\n%s\nwant\n%s", hook.n, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f = newFrameReader(io.NopCloser(bytes.NewReader(body)))
	sseBytes, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(sseBytes) != string(sseBody(evs)) {
		t.Errorf("bytes: got %q, %v\nwant %q", sseBytes, err, sseBody(evs))
	}
	f = newFrameReader(io.NopCloser(bytes.NewReader(body[:len(body)-3])))
	for {
		if _, err = f.NextEvent(nil); err != nil {
			break
		}
	}
	f.Close()
	if err != sse.ErrTruncated {
		t.Errorf("cut: got %v, want sse.ErrTruncated", err)
	}
}
