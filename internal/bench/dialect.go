package bench

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/streamgate/streamgate/internal/api"
)

// The client APIs a load can speak (Config.API).
const (
	APIChat      = "chat"      // POST {base}/chat/completions, OpenAI Chat Completions
	APIMessages  = "messages"  // POST {base}/messages, Anthropic Messages
	APIResponses = "responses" // POST {base}/responses, OpenAI Responses
)

// APIs lists the client APIs, the default first.
var APIs = []string{APIChat, APIMessages, APIResponses}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// apiPath is the endpoint of each API under the base URL (".../v1").
var apiPath = map[string]string{APIChat: "/chat/completions", APIMessages: "/messages", APIResponses: "/responses"}

// defaultMessagesMaxTokens is max_tokens of a Messages request when the
// load sets none: the API requires one.
const defaultMessagesMaxTokens = 4096

// dialectBody is the JSON object (without its closing brace) of a prompt
// in api's request shape, streamed, with the extra fields.
func dialectBody(apiName, model string, p Prompt, extra map[string]json.RawMessage) ([]byte, error) {
	m := map[string]any{"model": model, "stream": true}
	switch apiName {
	case APIChat:
		m["messages"] = p.Messages
		m["stream_options"] = api.StreamOptions{IncludeUsage: true}
	case APIMessages:
		var system []string
		type msg struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		msgs := make([]msg, 0, len(p.Messages))
		for _, x := range p.Messages {
			if x.Role == "system" || x.Role == "developer" {
				system = append(system, x.Text())
				continue
			}
			msgs = append(msgs, msg{Role: x.Role, Content: x.Text()})
		}
		if len(system) > 0 {
			m["system"] = string(bytes.Join(toBytes(system), []byte("\n")))
		}
		m["messages"] = msgs
	case APIResponses:
		type item struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		input := make([]item, 0, len(p.Messages))
		for _, x := range p.Messages {
			input = append(input, item{Role: x.Role, Content: x.Text()})
		}
		m["input"] = input
	default:
		return nil, fmt.Errorf("api %q: want one of chat, messages, responses", apiName)
	}
	return openObject(m, extra)
}

// openObject encodes m with extra's members added, without its closing
// brace, for the caller to append more members.
func openObject(m map[string]any, extra map[string]json.RawMessage) ([]byte, error) {
	for k, v := range extra {
		m[k] = v
	}
	enc, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return enc[:len(enc)-1], nil
}

func toBytes(s []string) [][]byte {
	out := make([][]byte, len(s))
	for i, v := range s {
		out[i] = []byte(v)
	}
	return out
}

// limitField is the output limit's member in api's requests.
func limitField(apiName string) string {
	if apiName == APIResponses {
		return `,"max_output_tokens":`
	}
	return `,"max_tokens":`
}

// eventInfo is what one event of a Messages or Responses stream carries
// for the measurements, as api.ChunkInfo is for a chat chunk.
type eventInfo struct {
	content  bool // a first-token event: a non-empty text, thinking, reasoning or tool-argument delta
	finish   bool // the answer's stop reason came (message_delta's, a terminal response)
	terminal bool // the stream's last event (message_stop; response.completed, .incomplete, .failed)
	failed   bool // an error event or a failed response
	// usage: the counts this event reports (-1: none).
	input, output, cacheRead, cacheWrite int
}

func noCounts() eventInfo { return eventInfo{input: -1, output: -1, cacheRead: -1, cacheWrite: -1} }

// scanMessages reads an Anthropic Messages event (name is its "event:"
// line, data its JSON) without allocating: the type from the name, else
// from the data; a content_block_delta's text, thinking or partial_json;
// message_start's and message_delta's usage; message_delta's stop_reason.
func scanMessages(name, data []byte) (eventInfo, error) {
	info := noCounts()
	var typ, delta, message, usage []byte
	err := api.EachMember(data, func(key, _, value []byte) error {
		switch string(key) {
		case "type":
			typ = value
		case "delta":
			delta = value
		case "message":
			message = value
		case "usage":
			usage = value
		}
		return nil
	})
	if err != nil {
		return info, err
	}
	if len(name) == 0 && len(typ) > 2 {
		name = typ[1 : len(typ)-1]
	}
	switch string(name) {
	case "content_block_delta":
		api.EachMember(delta, func(key, _, value []byte) error {
			switch string(key) {
			case "text", "thinking", "partial_json":
				if len(value) > 2 && value[0] == '"' {
					info.content = true
				}
			}
			return nil
		})
	case "message_start":
		api.EachMember(message, func(key, _, value []byte) error {
			if string(key) == "usage" {
				usage = value
			}
			return nil
		})
		anthropicUsage(usage, &info)
	case "message_delta":
		api.EachMember(delta, func(key, _, value []byte) error {
			if string(key) == "stop_reason" && len(value) > 0 && value[0] == '"' {
				info.finish = true
			}
			return nil
		})
		anthropicUsage(usage, &info)
	case "message_stop":
		info.terminal = true
	case "error":
		info.failed = true
	}
	return info, nil
}

// anthropicUsage reads a Messages usage object's counts into info.
func anthropicUsage(usage []byte, info *eventInfo) {
	api.EachMember(usage, func(key, _, value []byte) error {
		switch string(key) {
		case "input_tokens":
			info.input = count(value)
		case "output_tokens":
			info.output = count(value)
		case "cache_read_input_tokens":
			info.cacheRead = count(value)
		case "cache_creation_input_tokens":
			info.cacheWrite = count(value)
		}
		return nil
	})
}

// count reads a token count (a non-negative integer below api.CountLimit);
// -1 when value is none.
func count(value []byte) int {
	n := 0
	if len(value) == 0 || len(value) > 9 {
		return -1
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	if n >= api.CountLimit {
		return -1
	}
	return n
}

// scanResponses reads an OpenAI Responses event without allocating: its
// type (the "event:" line, else the data's "type"); a non-empty
// output_text, refusal, reasoning or tool-argument delta; a terminal
// event's usage (input_tokens with cached_tokens, output_tokens).
func scanResponses(name, data []byte) (eventInfo, error) {
	info := noCounts()
	var typ, delta, response []byte
	err := api.EachMember(data, func(key, _, value []byte) error {
		switch string(key) {
		case "type":
			typ = value
		case "delta":
			delta = value
		case "response":
			response = value
		}
		return nil
	})
	if err != nil {
		return info, err
	}
	if len(typ) > 2 {
		name = typ[1 : len(typ)-1]
	}
	switch string(name) {
	case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta",
		"response.reasoning_summary_text.delta", "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
		info.content = len(delta) > 2 && delta[0] == '"'
	case "response.completed", "response.incomplete", "response.failed":
		info.terminal = true
		info.finish = string(name) != "response.failed"
		info.failed = !info.finish
		var usage []byte
		api.EachMember(response, func(key, _, value []byte) error {
			if string(key) == "usage" {
				usage = value
			}
			return nil
		})
		api.EachMember(usage, func(key, _, value []byte) error {
			switch string(key) {
			case "input_tokens":
				info.input = count(value)
			case "output_tokens":
				info.output = count(value)
			case "input_tokens_details":
				api.EachMember(value, func(key, _, value []byte) error {
					if string(key) == "cached_tokens" {
						info.cacheRead = count(value)
					}
					return nil
				})
			}
			return nil
		})
	case "error":
		info.failed = true
	}
	return info, nil
}
