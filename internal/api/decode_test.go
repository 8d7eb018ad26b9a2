package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// plainChat decodes body as encoding/json does without Presize: the
// reference the presized decoding must agree with.
func plainChat(body []byte) (*ChatRequest, error) {
	var r ChatRequest
	err := json.Unmarshal(body, &r)
	return &r, err
}

var chatBodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"a","content":"1"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g","parameters":{"type":"object"}}}]}`,
	`{"model":"m","messages":[],"tools":[]}`,
	`{"model":"m","messages":null,"tools":null}`,
	`{"model":"m","messages":[{"role":"assistant","tool_calls":[]}]}`,
	`{"model":"m","messages":"x"}`,
	`{"model":"m","messages":[1]}`,
	`{"model":"m","messages":[{"role":"user","tool_calls":{"a":1}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"},{"role":"user","content":"c"}]}`,
	`{"model":"m","Messages":[{"role":"user","content":"a"}]}`,
	`null`,
	`[]`,
}

// TestChatRequestUnmarshal: the presized decoding gives what encoding/json
// gives, error or value, and makes the large slices at their length.
func TestChatRequestUnmarshal(t *testing.T) {
	for _, body := range chatBodies {
		var got ChatRequest
		gotErr := DecodeChat([]byte(body), &got)
		want, wantErr := plainChat([]byte(body))
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: got error %v, want %v", body, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !reflect.DeepEqual(&got, want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", body, got, *want)
		}
	}
	var r ChatRequest
	body := `{"model":"m","messages":[` + strings.Repeat(`{"role":"user","content":"hi"},`, 999) + `{"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":""}},{"id":"b","function":{"arguments":""}},{"id":"c","function":{"arguments":""}}]}]}`
	if err := DecodeChat([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1000 || cap(r.Messages) != 1000 {
		t.Errorf("got %d messages in a slice of capacity %d, want 1000 in 1000", len(r.Messages), cap(r.Messages))
	}
	if tc := r.Messages[999].ToolCalls; len(tc) != 3 || cap(tc) != 3 {
		t.Errorf("got %d tool calls in a slice of capacity %d, want 3 in 3", len(tc), cap(tc))
	}
}

// TestTooManyMessages: more than MaxMessages messages is a *TooManyError.
func TestTooManyMessages(t *testing.T) {
	body := `{"model":"m","messages":[` + strings.Repeat(`{},`, MaxMessages) + `{}]}`
	var r ChatRequest
	err := DecodeChat([]byte(body), &r)
	var many *TooManyError
	if !errors.As(err, &many) || many.Got != MaxMessages+1 || many.Field != "messages" {
		t.Fatalf("got %v, want too many messages (%d)", err, MaxMessages+1)
	}
	body = `{"model":"m","messages":[` + strings.Repeat(`{},`, MaxMessages-1) + `{}]}`
	r = ChatRequest{}
	if err := DecodeChat([]byte(body), &r); err != nil {
		t.Fatalf("got %v for %d messages, want none", err, MaxMessages)
	}
}

// FuzzChatRequestUnmarshal checks the presized decoding against
// encoding/json's own on any input.
func FuzzChatRequestUnmarshal(f *testing.F) {
	for _, b := range chatBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got ChatRequest
		gotErr := DecodeChat(body, &got)
		want, wantErr := plainChat(body)
		var many *TooManyError
		if errors.As(gotErr, &many) {
			return
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: got error %v, want %v", body, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(&got, want) {
			t.Fatalf("%q:\ngot  %+v\nwant %+v", body, got, *want)
		}
	})
}
