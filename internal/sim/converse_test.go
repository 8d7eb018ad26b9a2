package sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithy "github.com/aws/smithy-go"

	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/eventstream"
)

// headerRT adds headers (the sim's faults) to each request the SDK sends,
// and hands the SDK the answer read whole, from memory: the SDK v1.63's
// event-stream reader sometimes reads a body its own deserializer has
// closed ("use of closed network connection", about one run in five on a
// loaded machine), which a body in memory, whose Close does nothing,
// cannot fail.
type headerRT struct {
	base http.RoundTripper
	h    http.Header
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	resp, err := h.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, err
}

// converseClient is the AWS SDK's own Bedrock runtime client, signing
// with secret, pointed at srv.
func converseClient(srv *httptest.Server, secret string, h http.Header) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: SimAWSCredentials.AccessKeyID, SecretAccessKey: secret}, nil
		}),
		HTTPClient:       &http.Client{Transport: headerRT{srv.Client().Transport, h}},
		RetryMaxAttempts: 1,
	})
}

// TestConverseStreamSDK: the AWS SDK's ConverseStream against the
// simulator, signed by the SDK's own SigV4 signer: its event stream
// decodes into the SDK's events (messageStart, deltas, messageStop, then
// metadata with usage); a cachePoint after the system prompt writes the
// prefix to the cache, and the next request reads it (cacheWriteInputTokens,
// cacheReadInputTokens, inputTokens without them); a tool call streams its
// input; a wrong secret is refused 403.
func TestConverseStreamSDK(t *testing.T) {
	srv := httptest.NewServer(New(Options{Seed: 5, Profile: Profile{Name: "fast", TTFT: 1e6, ITL: 1e5, Tokens: 12}}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := converseClient(srv, SimAWSCredentials.SecretAccessKey, nil)
	system := strings.Repeat("You answer briefly and plainly. ", 400)
	input := &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String("us.amazon.nova-pro-v1:0"),
		System: []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: system},
			&types.SystemContentBlockMemberCachePoint{Value: types.CachePointBlock{Type: types.CachePointTypeDefault}}},
		Messages:        []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hello"}}}},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(20)},
	}
	var written int32
	for turn := range 2 {
		out, err := client.ConverseStream(ctx, input)
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		var kinds []string
		var text strings.Builder
		var usage *types.TokenUsage
		var stop types.StopReason
		for ev := range out.GetStream().Events() {
			switch e := ev.(type) {
			case *types.ConverseStreamOutputMemberMessageStart:
				kinds = append(kinds, "messageStart")
			case *types.ConverseStreamOutputMemberContentBlockDelta:
				if d, ok := e.Value.Delta.(*types.ContentBlockDeltaMemberText); ok {
					text.WriteString(d.Value)
				}
				if len(kinds) == 0 || kinds[len(kinds)-1] != "delta" {
					kinds = append(kinds, "delta")
				}
			case *types.ConverseStreamOutputMemberContentBlockStop:
				kinds = append(kinds, "stop")
			case *types.ConverseStreamOutputMemberMessageStop:
				kinds = append(kinds, "messageStop")
				stop = e.Value.StopReason
			case *types.ConverseStreamOutputMemberMetadata:
				kinds = append(kinds, "metadata")
				usage = e.Value.Usage
			}
		}
		if err := out.GetStream().Err(); err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		out.GetStream().Close()
		if got := strings.Join(kinds, " "); got != "messageStart delta stop messageStop metadata" || text.Len() == 0 || (stop != types.StopReasonEndTurn && stop != types.StopReasonMaxTokens) {
			t.Fatalf("turn %d: events %s, text %q, stop %q", turn, got, text.String(), stop)
		}
		if usage == nil || usage.InputTokens == nil || *usage.InputTokens == 0 || usage.CacheWriteInputTokens == nil || usage.CacheReadInputTokens == nil {
			t.Fatalf("turn %d: usage %+v", turn, usage)
		}
		if turn == 0 {
			written = *usage.CacheWriteInputTokens
			if written == 0 || *usage.CacheReadInputTokens != 0 || *usage.InputTokens >= written {
				t.Errorf("turn 0: input %d, write %d, read %d: want the system prompt written, inputTokens without it", *usage.InputTokens, written, *usage.CacheReadInputTokens)
			}
		} else if *usage.CacheReadInputTokens != written || *usage.CacheWriteInputTokens != 0 {
			t.Errorf("turn 1: read %d, write %d, want %d read", *usage.CacheReadInputTokens, *usage.CacheWriteInputTokens, written)
		}
	}

	// A tool call, streamed.
	toolClient := converseClient(srv, SimAWSCredentials.SecretAccessKey, http.Header{HeaderToolCall: {"get_weather"}})
	out, err := toolClient.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId:  aws.String("mistral.mistral-large-2407-v1:0"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "weather?"}}}},
		ToolConfig: &types.ToolConfiguration{Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
			Name: aws.String("get_weather"), InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object"})}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var name, args string
	var stop types.StopReason
	for ev := range out.GetStream().Events() {
		switch e := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if s, ok := e.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				name = aws.ToString(s.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			if d, ok := e.Value.Delta.(*types.ContentBlockDeltaMemberToolUse); ok {
				args += aws.ToString(d.Value.Input)
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = e.Value.StopReason
		}
	}
	out.GetStream().Close()
	if name != "get_weather" || !strings.HasPrefix(args, "{") || stop != types.StopReasonToolUse {
		t.Errorf("tool call: name %q args %q stop %q", name, args, stop)
	}

	// Unstreamed.
	conv, err := client.Converse(ctx, &bedrockruntime.ConverseInput{ModelId: aws.String("meta.llama3-70b-instruct-v1:0"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := conv.Output.(*types.ConverseOutputMemberMessage)
	if !ok || len(msg.Value.Content) == 0 || conv.Usage == nil || aws.ToInt32(conv.Usage.OutputTokens) == 0 {
		t.Errorf("converse: got %+v usage %+v", conv.Output, conv.Usage)
	}

	// A wrong secret: AWS's 403.
	_, err = converseClient(srv, "wrong", nil).Converse(ctx, &bedrockruntime.ConverseInput{ModelId: aws.String("m"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("wrong secret: got %v", err)
	}
}

// TestConverseStreamException: X-Sim-Error-At sends an exception frame
// mid-stream, after the text so far, as Bedrock does, and nothing after
// it. (Read with the decoder: the AWS SDK v1.63's reader surfaces such an
// exception only sometimes, racing its own close of the body.)
func TestConverseStreamException(t *testing.T) {
	srv := httptest.NewServer(New(Options{Seed: 5, Profile: Profile{Name: "fast", TTFT: 1e6, ITL: 1e5, Tokens: 12}}))
	defer srv.Close()
	signer := cloudauth.SigV4{Service: "bedrock", Region: "us-east-1", Creds: SimAWSCredentials}
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/model/us.amazon.nova-lite-v1%3A0/converse-stream", bytes.NewReader(body))
	req.Header.Set(HeaderErrorAt, "3")
	if err := signer.Sign(req, cloudauth.PayloadHash(body), time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	dec := eventstream.NewDecoder(bytes.NewReader(raw), 0)
	var got []string
	for {
		m, err := dec.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.String(":message-type")+":"+m.String(":event-type")+m.String(":exception-type"))
	}
	want := "event:messageStart event:contentBlockDelta event:contentBlockDelta exception:serviceUnavailableException"
	if strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
}

// TestConverseRefusals: the simulated Bedrock refuses what Bedrock
// refuses, in its ValidationException shape: an unknown member, a block
// with two members, blank text, roles that do not alternate, tool blocks
// without a toolConfig.
func TestConverseRefusals(t *testing.T) {
	srv := httptest.NewServer(New(Options{Seed: 5}))
	defer srv.Close()
	signer := cloudauth.SigV4{Service: "bedrock", Region: "us-east-1", Creds: SimAWSCredentials}
	for name, body := range map[string]string{
		"unknown member":   `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"max_tokens":5}`,
		"two members":      `{"messages":[{"role":"user","content":[{"text":"hi","cachePoint":{"type":"default"}}]}]}`,
		"blank text":       `{"messages":[{"role":"user","content":[{"text":" "}]}]}`,
		"not alternating":  `{"messages":[{"role":"user","content":[{"text":"a"}]},{"role":"user","content":[{"text":"b"}]}]}`,
		"tools undeclared": `{"messages":[{"role":"user","content":[{"text":"a"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"w","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"text":"x"}]}}]}]}`,
		"starts assistant": `{"messages":[{"role":"assistant","content":[{"text":"a"}]}]}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/model/"+cloudauth.PathEscape("us.amazon.nova-pro-v1:0")+"/converse-stream", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, cloudauth.PayloadHash([]byte(body)), time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Errortype") != "ValidationException" || !bytes.HasPrefix(b, []byte(`{"message":`)) {
			t.Errorf("%s: got %d %s %s", name, resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), b)
		}
	}
}
