package anthropic

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// TestAppendJSONAsEncodingJSON checks the hand-written body against
// encoding/json's encoding of the same request (blocks with a raw form
// written as that raw member), for every request fixture and a few
// bodies with what escaping and omission must get right.
func TestAppendJSONAsEncodingJSON(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "request", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no request fixtures: %v", err)
	}
	bodies := map[string][]byte{
		"escapes": []byte(`{"model":"m","messages":[{"role":"system","content":"<b>&</b>\u2028\u0001\"\\"},{"role":"user","content":[{"type":"text","text":"tab\there \ud83d\ude00 é","cache_control":{ "type" : "ephemeral" }}]}],"temperature":1e-7,"top_p":0.5,"stop":["\n\n"],"user":"u<1>"}`),
		"tools":   []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{ \"a\" : [1, 2] }"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"r"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}],"tools":[{"type":"function","function":{"name":"f","description":"d <x>","parameters":{"type":"object"}}}],"temperature":2}`),
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		bodies[filepath.Base(f)] = b
	}
	for name, body := range bodies {
		var chat api.ChatRequest
		if err := json.Unmarshal(body, &chat); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := translate(&provider.Request{Model: "up", Body: body, Chat: &chat}, true)
		if err != nil {
			continue // a fixture of a refused request
		}
		got, err := out.appendJSON(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := reference(t, out)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// reference encodes r with encoding/json, blocks with a raw form as it.
func reference(t *testing.T, r *request) []byte {
	t.Helper()
	type refBlock = any
	var conv func([]block) []refBlock
	conv = func(bs []block) []refBlock {
		if bs == nil {
			return nil
		}
		out := make([]refBlock, len(bs))
		for i, b := range bs {
			if b.raw != nil {
				out[i] = json.RawMessage(b.raw)
				continue
			}
			type plain struct {
				Type         string          `json:"type"`
				Text         string          `json:"text,omitempty"`
				Source       *imageSource    `json:"source,omitempty"`
				ID           string          `json:"id,omitempty"`
				Name         string          `json:"name,omitempty"`
				Input        json.RawMessage `json:"input,omitempty"`
				ToolUseID    string          `json:"tool_use_id,omitempty"`
				Content      []refBlock      `json:"content,omitempty"`
				Thinking     string          `json:"thinking,omitempty"`
				Signature    string          `json:"signature,omitempty"`
				Data         string          `json:"data,omitempty"`
				CacheControl json.RawMessage `json:"cache_control,omitempty"`
			}
			m := b.more
			if m == nil {
				m = &blockMore{}
			}
			out[i] = plain{b.Type, b.Text, m.Source, m.ID, m.Name, m.Input, m.ToolUseID, conv(m.Content), m.Thinking, m.Signature, m.Data, b.CacheControl}
		}
		return out
	}
	type refTurn struct {
		Role    string     `json:"role"`
		Content []refBlock `json:"content"`
	}
	var turns []refTurn
	if r.Messages != nil {
		turns = make([]refTurn, len(r.Messages))
		for i, m := range r.Messages {
			turns[i] = refTurn{m.Role, conv(m.Content)}
		}
	}
	ref := struct {
		Model         string          `json:"model"`
		MaxTokens     int             `json:"max_tokens"`
		System        []refBlock      `json:"system,omitempty"`
		Messages      []refTurn       `json:"messages"`
		Temperature   *float64        `json:"temperature,omitempty"`
		TopP          *float64        `json:"top_p,omitempty"`
		TopK          *int            `json:"top_k,omitempty"`
		StopSequences []string        `json:"stop_sequences,omitempty"`
		Tools         []tool          `json:"tools,omitempty"`
		ToolChoice    *toolChoice     `json:"tool_choice,omitempty"`
		Thinking      json.RawMessage `json:"thinking,omitempty"`
		OutputConfig  *outputConfig   `json:"output_config,omitempty"`
		Metadata      *metadata       `json:"metadata,omitempty"`
		Stream        bool            `json:"stream"`
	}{r.Model, r.MaxTokens, conv(r.System), turns, r.Temperature, r.TopP, r.TopK, r.StopSequences, r.Tools, r.ToolChoice, r.Thinking, r.OutputConfig, r.Metadata, r.Stream}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&ref); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}
