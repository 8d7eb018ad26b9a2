package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/provider"
)

func TestBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		stream bool
		want   map[string]string // field → raw JSON
	}{
		{"stream forces include_usage", `{"model":"alias","messages":[],"temperature":0.5}`, true,
			map[string]string{"model": `"up-model"`, "stream": "true", "stream_options": `{"include_usage":true}`, "temperature": "0.5", "messages": "[]"}},
		{"client stream_options kept", `{"model":"alias","stream_options":{"include_usage":false,"x":1}}`, true,
			map[string]string{"stream_options": `{"include_usage":true,"x":1}`}},
		{"non-stream drops stream_options", `{"model":"alias","stream_options":{"include_usage":true}}`, false,
			map[string]string{"stream": "false", "stream_options": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.body), &raw); err != nil {
				t.Fatal(err)
			}
			b, err := Body(&provider.Request{Model: "up-model", Body: raw}, tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.want {
				if string(got[k]) != want {
					t.Errorf("%s: got %s, want %s", k, got[k], want)
				}
			}
			if string(raw["model"]) != `"alias"` {
				t.Errorf("the request's body was modified: model %s", raw["model"])
			}
		})
	}
}

func TestStatusErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		retryAfter string
		want       provider.Error
	}{
		{"rate limit with retry-after", 429, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limited"}}`, "7",
			provider.Error{Status: 429, Retryable: true, Type: "rate_limit_error", Code: "rate_limited", Message: "slow down", RetryAfter: 7 * time.Second}},
		{"server error plain text", 500, "boom", "", provider.Error{Status: 500, Retryable: true, Message: "boom"}},
		{"bad request", 400, `{"error":{"message":"context too long","code":null}}`, "", provider.Error{Status: 400, Message: "context too long"}},
		{"empty body", 503, "", "", provider.Error{Status: 503, Retryable: true, Message: "Service Unavailable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Get("Authorization"); got != "Bearer sk-up" {
					t.Errorf("got Authorization %q, want Bearer sk-up", got)
				}
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c := New(srv.URL+"/v1", "sk-up", Options{})
			defer c.CloseIdleConnections()
			_, err := c.Open(context.Background(), &provider.Request{Model: "m", Stream: true})
			var perr *provider.Error
			if !errors.As(err, &perr) {
				t.Fatalf("got %v, want a *provider.Error", err)
			}
			if *perr != tt.want {
				t.Errorf("got %+v, want %+v", *perr, tt.want)
			}
		})
	}
}

func TestConnectRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := New(url+"/v1", "", Options{ConnectTimeout: time.Second})
	_, err := c.Complete(context.Background(), &provider.Request{Model: "m"})
	var perr *provider.Error
	if !errors.Is(err, provider.ErrConnect) || !errors.As(err, &perr) || !perr.Retryable {
		t.Errorf("got %v, want a retryable *provider.Error wrapping ErrConnect", err)
	}
}
