package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestStopSequences(t *testing.T) {
	for _, tt := range []struct {
		stop    string
		want    []string
		wantErr bool
	}{
		{``, nil, false},
		{`null`, nil, false},
		{`"END"`, []string{"END"}, false},
		{`["a","b"]`, []string{"a", "b"}, false},
		{`5`, nil, true},
		{`[1]`, nil, true},
	} {
		r := ChatRequest{Stop: json.RawMessage(tt.stop)}
		got, err := r.StopSequences()
		if !reflect.DeepEqual(got, tt.want) || (err != nil) != tt.wantErr {
			t.Errorf("stop %s: got %q, %v; want %q, error %v", tt.stop, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestMessageParts(t *testing.T) {
	for _, tt := range []struct {
		content string
		want    []ContentPart
		wantErr bool
	}{
		{``, nil, false},
		{`null`, nil, false},
		{`"hi"`, []ContentPart{{Type: "text", Text: "hi"}}, false},
		{`[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]`,
			[]ContentPart{{Type: "text", Text: "a", CacheControl: json.RawMessage(`{"type":"ephemeral"}`)}, {Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AA=="}}}, false},
		{`5`, nil, true},
	} {
		got, err := Message{Role: "user", Content: json.RawMessage(tt.content)}.Parts()
		if !reflect.DeepEqual(got, tt.want) || (err != nil) != tt.wantErr {
			t.Errorf("content %s: got %+v, %v; want %+v, error %v", tt.content, got, err, tt.want, tt.wantErr)
		}
	}
}

// Retry-After is whole seconds, rounded up: waiting that long is enough.
func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{time.Nanosecond, "1"}, {time.Second, "1"}, {1001 * time.Millisecond, "2"}, {5 * time.Minute, "300"},
	} {
		if got := RetryAfter(tt.d); got != tt.want {
			t.Errorf("RetryAfter(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
