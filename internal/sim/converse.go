package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/eventstream"
)

// The Converse request as Bedrock reads it: every member it documents,
// so that any other is refused as Bedrock refuses it. Unions (a content
// block, a tool) must have exactly one member set.
type (
	converseIn struct {
		Messages                          []converseMessage  `json:"messages"`
		System                            []converseSystem   `json:"system"`
		InferenceConfig                   *converseInference `json:"inferenceConfig"`
		ToolConfig                        *converseTools     `json:"toolConfig"`
		AdditionalModelRequestFields      json.RawMessage    `json:"additionalModelRequestFields"`
		OutputConfig                      json.RawMessage    `json:"outputConfig"`
		GuardrailConfig                   json.RawMessage    `json:"guardrailConfig"`
		PromptVariables                   json.RawMessage    `json:"promptVariables"`
		AdditionalModelResponseFieldPaths json.RawMessage    `json:"additionalModelResponseFieldPaths"`
		RequestMetadata                   json.RawMessage    `json:"requestMetadata"`
		PerformanceConfig                 json.RawMessage    `json:"performanceConfig"`
		ServiceTier                       json.RawMessage    `json:"serviceTier"`
	}
	converseMessage struct {
		Role    string          `json:"role"`
		Content []converseBlock `json:"content"`
	}
	converseBlock struct {
		Text  *string `json:"text"`
		Image *struct {
			Format string         `json:"format"`
			Source converseSource `json:"source"`
		} `json:"image"`
		Document *struct {
			Format    string          `json:"format"`
			Name      string          `json:"name"`
			Source    converseSource  `json:"source"`
			Context   json.RawMessage `json:"context"`
			Citations json.RawMessage `json:"citations"`
		} `json:"document"`
		ToolUse *struct {
			ToolUseID string          `json:"toolUseId"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			Type      json.RawMessage `json:"type"`
		} `json:"toolUse"`
		ToolResult *struct {
			ToolUseID string `json:"toolUseId"`
			Content   []struct {
				Text  *string         `json:"text"`
				JSON  json.RawMessage `json:"json"`
				Image json.RawMessage `json:"image"`
			} `json:"content"`
			Status string          `json:"status"`
			Type   json.RawMessage `json:"type"`
		} `json:"toolResult"`
		ReasoningContent *struct {
			ReasoningText *struct {
				Text      string `json:"text"`
				Signature string `json:"signature"`
			} `json:"reasoningText"`
			RedactedContent string `json:"redactedContent"`
		} `json:"reasoningContent"`
		CachePoint   *converseCachePoint `json:"cachePoint"`
		GuardContent json.RawMessage     `json:"guardContent"`
	}
	converseSource struct {
		Bytes string `json:"bytes"`
	}
	converseCachePoint struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	converseSystem struct {
		Text         *string             `json:"text"`
		CachePoint   *converseCachePoint `json:"cachePoint"`
		GuardContent json.RawMessage     `json:"guardContent"`
	}
	converseInference struct {
		MaxTokens     *int     `json:"maxTokens"`
		Temperature   *float64 `json:"temperature"`
		TopP          *float64 `json:"topP"`
		StopSequences []string `json:"stopSequences"`
	}
	converseTools struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
				Strict *bool `json:"strict"`
			} `json:"toolSpec"`
			CachePoint *converseCachePoint `json:"cachePoint"`
			SystemTool json.RawMessage     `json:"systemTool"`
		} `json:"tools"`
		ToolChoice *struct {
			Auto *struct{} `json:"auto"`
			Any  *struct{} `json:"any"`
			Tool *struct {
				Name string `json:"name"`
			} `json:"tool"`
		} `json:"toolChoice"`
	}
)

// validationError is a ValidationException's message.
type validationError string

func (e validationError) Error() string { return string(e) }

// converseToAnthropic reads a Converse request as Bedrock does (unknown
// members, unions with other than one member, blank text, roles that do
// not alternate, tool blocks without a toolConfig: refused) and writes the
// Anthropic Messages request the simulator's Anthropic dialect serves:
// a cachePoint becomes the cache_control of the block before it.
func converseToAnthropic(body []byte, model string, stream bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var in converseIn
	if err := dec.Decode(&in); err != nil {
		return nil, validationError("Malformed input request: " + err.Error() + ", please reformat your input and try again.")
	}
	if len(in.Messages) == 0 {
		return nil, validationError("The model returned the following errors: messages: at least one message is required")
	}
	out := map[string]any{"model": model, "stream": stream}
	cacheOf := func(cp *converseCachePoint, at string) (map[string]any, error) {
		if cp.Type != "default" {
			return nil, validationError(fmt.Sprintf("%s.cachePoint.type: %q is not a valid value (default)", at, cp.Type))
		}
		cc := map[string]any{"type": "ephemeral"}
		switch cp.TTL {
		case "":
		case "5m", "1h":
			cc["ttl"] = cp.TTL
		default:
			return nil, validationError(fmt.Sprintf("%s.cachePoint.ttl: %q is not a valid value (5m, 1h)", at, cp.TTL))
		}
		return cc, nil
	}
	// mark puts a cachePoint's cache_control on the last block.
	mark := func(blocks []map[string]any, cp *converseCachePoint, at string) error {
		cc, err := cacheOf(cp, at)
		if err != nil {
			return err
		}
		if len(blocks) == 0 {
			return validationError(at + ": a cachePoint must follow the content it caches")
		}
		blocks[len(blocks)-1]["cache_control"] = cc
		return nil
	}
	var system []map[string]any
	for i, sb := range in.System {
		at := fmt.Sprintf("system.%d", i)
		switch members(sb.Text != nil, sb.CachePoint != nil, sb.GuardContent != nil) {
		case 1:
		default:
			return nil, validationError(at + ": a SystemContentBlock must have exactly one member set")
		}
		switch {
		case sb.Text != nil:
			if strings.TrimSpace(*sb.Text) == "" {
				return nil, validationError("The text field in the SystemContentBlock object at " + at + " is blank. Add text to the text field, and try again.")
			}
			system = append(system, map[string]any{"type": "text", "text": *sb.Text})
		case sb.CachePoint != nil:
			if err := mark(system, sb.CachePoint, at); err != nil {
				return nil, err
			}
		}
	}
	if system != nil {
		out["system"] = system
	}
	toolBlocks := false
	var msgs []map[string]any
	for i, m := range in.Messages {
		at := fmt.Sprintf("messages.%d", i)
		switch {
		case m.Role != "user" && m.Role != "assistant":
			return nil, validationError(fmt.Sprintf("%s.role: %q is not a valid value (user, assistant)", at, m.Role))
		case i == 0 && m.Role != "user":
			return nil, validationError("A conversation must start with a user message. Try again with a conversation that starts with a user message.")
		case i > 0 && m.Role == in.Messages[i-1].Role:
			return nil, validationError("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.")
		case len(m.Content) == 0:
			return nil, validationError(at + ".content: at least one content block is required")
		}
		var blocks []map[string]any
		for j, b := range m.Content {
			bat := fmt.Sprintf("%s.content.%d", at, j)
			if members(b.Text != nil, b.Image != nil, b.Document != nil, b.ToolUse != nil, b.ToolResult != nil,
				b.ReasoningContent != nil, b.CachePoint != nil, b.GuardContent != nil) != 1 {
				return nil, validationError(bat + ": a ContentBlock must have exactly one member set")
			}
			switch {
			case b.Text != nil:
				if strings.TrimSpace(*b.Text) == "" {
					return nil, validationError("The text field in the ContentBlock object at " + bat + " is blank. Add text to the text field, and try again.")
				}
				blocks = append(blocks, map[string]any{"type": "text", "text": *b.Text})
			case b.Image != nil:
				switch b.Image.Format {
				case "png", "jpeg", "gif", "webp":
				default:
					return nil, validationError(fmt.Sprintf("%s.image.format: %q is not a valid value (png, jpeg, gif, webp)", bat, b.Image.Format))
				}
				blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/" + b.Image.Format, "data": b.Image.Source.Bytes}})
			case b.Document != nil:
				if b.Document.Name == "" {
					return nil, validationError(bat + ".document.name: required")
				}
				blocks = append(blocks, map[string]any{"type": "text", "text": "[document " + b.Document.Name + "]"})
			case b.ToolUse != nil:
				toolBlocks = true
				tu := b.ToolUse
				if tu.ToolUseID == "" || tu.Name == "" || len(tu.Input) == 0 || tu.Input[0] != '{' {
					return nil, validationError(bat + ".toolUse: toolUseId, name and an object input are required")
				}
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": tu.ToolUseID, "name": tu.Name, "input": tu.Input})
			case b.ToolResult != nil:
				toolBlocks = true
				tr := b.ToolResult
				var content []map[string]any
				for k, c := range tr.Content {
					switch {
					case c.Text != nil:
						if *c.Text == "" {
							return nil, validationError(fmt.Sprintf("The text field in the ToolResultContentBlock object at %s.toolResult.content.%d is blank. Add text to the text field, and try again.", bat, k))
						}
						content = append(content, map[string]any{"type": "text", "text": *c.Text})
					case c.JSON != nil:
						content = append(content, map[string]any{"type": "text", "text": string(c.JSON)})
					}
				}
				tb := map[string]any{"type": "tool_result", "tool_use_id": tr.ToolUseID, "content": content}
				switch tr.Status {
				case "", "success":
				case "error":
					tb["is_error"] = true
				default:
					return nil, validationError(fmt.Sprintf("%s.toolResult.status: %q is not a valid value (success, error)", bat, tr.Status))
				}
				blocks = append(blocks, tb)
			case b.ReasoningContent != nil:
				rc := b.ReasoningContent
				switch {
				case rc.ReasoningText != nil:
					blocks = append(blocks, map[string]any{"type": "thinking", "thinking": rc.ReasoningText.Text, "signature": rc.ReasoningText.Signature})
				case rc.RedactedContent != "":
					blocks = append(blocks, map[string]any{"type": "redacted_thinking", "data": rc.RedactedContent})
				default:
					return nil, validationError(bat + ".reasoningContent: a ReasoningContentBlock must have exactly one member set")
				}
			case b.CachePoint != nil:
				if err := mark(blocks, b.CachePoint, bat); err != nil {
					return nil, err
				}
			case b.GuardContent != nil:
			}
		}
		if len(blocks) == 0 {
			return nil, validationError(at + ".content: a message needs content besides its cache points")
		}
		msgs = append(msgs, map[string]any{"role": m.Role, "content": blocks})
	}
	out["messages"] = msgs
	out["max_tokens"] = 4096 // the models' default when inferenceConfig gives none
	if ic := in.InferenceConfig; ic != nil {
		if ic.MaxTokens != nil {
			if *ic.MaxTokens < 1 {
				return nil, validationError("inferenceConfig.maxTokens: must be at least 1")
			}
			out["max_tokens"] = *ic.MaxTokens
		}
		if ic.Temperature != nil {
			out["temperature"] = *ic.Temperature
		}
		if ic.TopP != nil {
			out["top_p"] = *ic.TopP
		}
		for k, s := range ic.StopSequences {
			if s == "" {
				return nil, validationError(fmt.Sprintf("inferenceConfig.stopSequences.%d: must not be empty", k))
			}
		}
		if ic.StopSequences != nil {
			out["stop_sequences"] = ic.StopSequences
		}
	}
	if tc := in.ToolConfig; tc != nil {
		var tools []map[string]any
		for i, t := range tc.Tools {
			at := fmt.Sprintf("toolConfig.tools.%d", i)
			if members(t.ToolSpec != nil, t.CachePoint != nil, t.SystemTool != nil) != 1 {
				return nil, validationError(at + ": a Tool must have exactly one member set")
			}
			switch {
			case t.ToolSpec != nil:
				ts := t.ToolSpec
				if ts.Name == "" || len(ts.InputSchema.JSON) == 0 || ts.InputSchema.JSON[0] != '{' {
					return nil, validationError(at + ".toolSpec: name and inputSchema.json (an object) are required")
				}
				tl := map[string]any{"name": ts.Name, "input_schema": ts.InputSchema.JSON}
				if ts.Description != "" {
					tl["description"] = ts.Description
				}
				tools = append(tools, tl)
			case t.CachePoint != nil:
				if err := mark(tools, t.CachePoint, at); err != nil {
					return nil, err
				}
			}
		}
		if len(tools) == 0 {
			return nil, validationError("toolConfig.tools: at least one tool is required")
		}
		out["tools"] = tools
		if ch := tc.ToolChoice; ch != nil {
			switch {
			case members(ch.Auto != nil, ch.Any != nil, ch.Tool != nil) != 1:
				return nil, validationError("toolConfig.toolChoice: a ToolChoice must have exactly one member set")
			case ch.Auto != nil:
				out["tool_choice"] = map[string]any{"type": "auto"}
			case ch.Any != nil:
				out["tool_choice"] = map[string]any{"type": "any"}
			default:
				out["tool_choice"] = map[string]any{"type": "tool", "name": ch.Tool.Name}
			}
		}
	} else if toolBlocks {
		return nil, validationError("The toolConfig field must be defined when using toolUse and toolResult content blocks.")
	}
	if f := in.AdditionalModelRequestFields; len(f) > 0 && string(f) != "null" {
		var fields map[string]json.RawMessage
		if json.Unmarshal(f, &fields) != nil {
			return nil, validationError("additionalModelRequestFields: must be an object")
		}
		if th, ok := fields["thinking"]; ok {
			out["thinking"] = th
		}
	}
	return json.Marshal(out)
}

// members counts the members of a union that are set.
func members(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}

// bedrockConverse serves Converse and ConverseStream: the request read as
// Bedrock reads it (converseToAnthropic), served by the Anthropic dialect,
// its answer written back as Converse's (converseState).
func (s *Server) bedrockConverse(w http.ResponseWriter, r *http.Request, model string, body []byte, owner string, stream bool) {
	inner, err := converseToAnthropic(body, model, stream)
	if err != nil {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(inner))
	r2.ContentLength = int64(len(inner))
	r2.Header.Del("Authorization")
	r2.Header.Set("X-Api-Key", owner) // the prompt cache is the credential's
	bw := &bedrockWriter{w: w, stream: stream, converse: &converseState{}}
	s.messages(false)(bw, r2)
	bw.finish()
}

// converseState is what a bedrockWriter answering Converse keeps of the
// Anthropic stream it rewrites.
type converseState struct {
	cacheRead, cacheWrite int
	stop                  string
	body                  []byte // a non-streamed answer, written at finish
}

// converseStop spells Anthropic's stop_reason as Converse's stopReason.
func converseStop(r string) string {
	switch r {
	case "tool_use", "max_tokens", "stop_sequence", "end_turn":
		return r
	case "refusal":
		return "content_filtered"
	case "model_context_window_exceeded":
		return r
	}
	return "end_turn"
}

// converseEvent writes one Anthropic SSE event as Converse's event frames
// (each payload padded with "p", as Bedrock pads them).
func (b *bedrockWriter) converseEvent(name string, data []byte) error {
	c := b.converse
	var ev struct {
		Type  string `json:"type"`
		Index *int   `json:"index"`
		Block struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			Name string `json:"name"`
			Data string `json:"data"`
		} `json:"content_block"`
		Delta struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Message struct {
			Usage struct {
				Input      int `json:"input_tokens"`
				CacheRead  int `json:"cache_read_input_tokens"`
				CacheWrite int `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Usage struct {
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(data, &ev)
	send := func(typ string, v map[string]any) error {
		v["p"] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"[:1+len(typ)%32]
		payload, _ := json.Marshal(v)
		return b.writeFrame([]eventstream.Header{
			eventstream.StringHeader(":event-type", typ),
			eventstream.StringHeader(":content-type", "application/json"),
			eventstream.StringHeader(":message-type", "event"),
		}, payload)
	}
	idx := 0
	if ev.Index != nil {
		idx = *ev.Index
	}
	switch ev.Type {
	case "message_start":
		u := ev.Message.Usage
		b.input, c.cacheRead, c.cacheWrite = u.Input, u.CacheRead, u.CacheWrite
		return send("messageStart", map[string]any{"role": "assistant"})
	case "content_block_start":
		switch ev.Block.Type {
		case "tool_use":
			return send("contentBlockStart", map[string]any{"contentBlockIndex": idx,
				"start": map[string]any{"toolUse": map[string]any{"toolUseId": ev.Block.ID, "name": ev.Block.Name}}})
		case "redacted_thinking":
			return send("contentBlockDelta", map[string]any{"contentBlockIndex": idx,
				"delta": map[string]any{"reasoningContent": map[string]any{"redactedContent": ev.Block.Data}}})
		}
	case "content_block_delta":
		if b.first == 0 {
			b.first = time.Since(b.start)
		}
		var d map[string]any
		switch ev.Delta.Type {
		case "text_delta":
			d = map[string]any{"text": ev.Delta.Text}
		case "input_json_delta":
			d = map[string]any{"toolUse": map[string]any{"input": ev.Delta.PartialJSON}}
		case "thinking_delta":
			d = map[string]any{"reasoningContent": map[string]any{"text": ev.Delta.Thinking}}
		case "signature_delta":
			d = map[string]any{"reasoningContent": map[string]any{"signature": ev.Delta.Signature}}
		default:
			return nil
		}
		return send("contentBlockDelta", map[string]any{"contentBlockIndex": idx, "delta": d})
	case "content_block_stop":
		return send("contentBlockStop", map[string]any{"contentBlockIndex": idx})
	case "message_delta":
		b.output = ev.Usage.Output
		if ev.Delta.StopReason != "" {
			c.stop = converseStop(ev.Delta.StopReason)
		}
	case "message_stop":
		if err := send("messageStop", map[string]any{"stopReason": c.stop}); err != nil {
			return err
		}
		return send("metadata", map[string]any{"usage": c.usage(b), "metrics": map[string]any{"latencyMs": time.Since(b.start).Milliseconds()}})
	}
	return nil
}

// usage is Converse's TokenUsage: inputTokens without the cache reads
// and writes, which have their own counts.
func (c *converseState) usage(b *bedrockWriter) map[string]any {
	return map[string]any{"inputTokens": b.input, "outputTokens": b.output,
		"totalTokens":          b.input + b.output + c.cacheRead + c.cacheWrite,
		"cacheReadInputTokens": c.cacheRead, "cacheWriteInputTokens": c.cacheWrite}
}

// converseAnswer rewrites the Anthropic dialect's Message into a
// ConverseResponse.
func converseAnswer(msg []byte, latency time.Duration) []byte {
	var m struct {
		Content []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			Thinking  string          `json:"thinking"`
			Signature string          `json:"signature"`
			Data      string          `json:"data"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			Input      int `json:"input_tokens"`
			Output     int `json:"output_tokens"`
			CacheRead  int `json:"cache_read_input_tokens"`
			CacheWrite int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(msg, &m)
	var content []map[string]any
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			content = append(content, map[string]any{"text": b.Text})
		case "thinking":
			content = append(content, map[string]any{"reasoningContent": map[string]any{"reasoningText": map[string]any{"text": b.Thinking, "signature": b.Signature}}})
		case "redacted_thinking":
			content = append(content, map[string]any{"reasoningContent": map[string]any{"redactedContent": b.Data}})
		case "tool_use":
			content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": b.ID, "name": b.Name, "input": b.Input}})
		}
	}
	u := m.Usage
	out, _ := json.Marshal(map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": converseStop(m.StopReason),
		"usage": map[string]any{"inputTokens": u.Input, "outputTokens": u.Output, "totalTokens": u.Input + u.Output + u.CacheRead + u.CacheWrite,
			"cacheReadInputTokens": u.CacheRead, "cacheWriteInputTokens": u.CacheWrite},
		"metrics": map[string]any{"latencyMs": latency.Milliseconds()},
	})
	return out
}
