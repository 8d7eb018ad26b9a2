package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/sse"
)

func TestBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		stream bool
		want   map[string]string // field → raw JSON, "" = absent
	}{
		{"stream forces include_usage", `{"model":"alias","messages":[],"temperature":0.5}`, true,
			map[string]string{"model": `"up-model"`, "stream": "true", "stream_options": `{"include_usage":true}`, "temperature": "0.5", "messages": "[]"}},
		{"client stream_options kept", `{"model":"alias","stream_options":{"include_usage":false,"x":1}}`, true,
			map[string]string{"stream_options": `{"include_usage":true,"x":1}`}},
		{"null stream_options", `{"model":"alias","stream":false,"stream_options":null}`, true,
			map[string]string{"stream": "true", "stream_options": `{"include_usage":true}`}},
		{"non-stream drops stream_options", `{"model":"alias","stream_options":{"include_usage":true}}`, false,
			map[string]string{"stream": "false", "stream_options": ""}},
		{"unknown fields pass through as sent", `{ "model" : "alias" , "tools" : [ {"type":"function","function":{"name":"f","parameters":{"a":"}]\""}}} ] , "n":1e3, "x":null, "y":true }`, true,
			map[string]string{"tools": `[ {"type":"function","function":{"name":"f","parameters":{"a":"}]\""}}} ]`, "n": "1e3", "x": "null", "y": "true", "model": `"up-model"`}},
		{"escaped key is the same key", `{"mod\u0065l":"alias","messages":[]}`, false,
			map[string]string{"model": `"up-model"`}},
		{"empty body", ``, true, map[string]string{"model": `"up-model"`, "stream": "true"}},
		{"empty object", `{}`, false, map[string]string{"model": `"up-model"`, "stream": "false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.body)
			b, err := Body(&provider.Request{Model: "up-model", Body: in}, tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(b) {
				t.Fatalf("got invalid JSON %s", b)
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
			// Every member appears once: the client's model/stream are replaced, not repeated.
			for _, k := range []string{`"model"`, `"stream"`} {
				if n := strings.Count(string(b), k+":"); n != 1 {
					t.Errorf("got %d %s members in %s, want 1", n, k, b)
				}
			}
			if string(in) != tt.body {
				t.Errorf("the request's body was modified: %s", in)
			}
		})
	}
}

func TestBodyModelEscaped(t *testing.T) {
	b, err := Body(&provider.Request{Model: `a"b<c`, Body: []byte(`{}`)}, false)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Model string }
	if err := json.Unmarshal(b, &got); err != nil || got.Model != `a"b<c` {
		t.Errorf("got model %q (%v) from %s, want %q", got.Model, err, b, `a"b<c`)
	}
}

func TestBodyMalformed(t *testing.T) {
	for _, body := range []string{`[1]`, `{"a":`, `{"a" 1}`, `{"a":1`, `{"a":"x}`, `{"a":{"b":1}`, `{"stream_options":5}`, `{"a":,}`} {
		if _, err := Body(&provider.Request{Model: "m", Body: []byte(body)}, true); err == nil {
			t.Errorf("Body(%s): got no error, want one", body)
		}
	}
}

func BenchmarkBody(b *testing.B) {
	req := &provider.Request{Model: "up-model", Body: []byte(`{"model":"m","stream":true,"max_tokens":64,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a haiku about latency and the sea, in English, with a title."}]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Body(req, true); err != nil {
			b.Fatal(err)
		}
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
		// A revoked key or a model missing on this provider: another route may serve.
		{"unauthorized", 401, `{"error":{"message":"bad key","code":"invalid_api_key"}}`, "", provider.Error{Status: 401, Retryable: true, Code: "invalid_api_key", Message: "bad key"}},
		{"forbidden", 403, "", "", provider.Error{Status: 403, Retryable: true, Message: "Forbidden"}},
		{"model not found", 404, `{"error":{"message":"no such model"}}`, "", provider.Error{Status: 404, Retryable: true, Message: "no such model"}},
		{"unprocessable", 422, `{"error":{"message":"bad field"}}`, "", provider.Error{Status: 422, Message: "bad field"}},
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

// A non-streaming answer larger than MaxCompleteBody is an error, not an
// unbounded read into memory.
func TestCompleteBodyLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := make([]byte, 1<<20)
		for range MaxCompleteBody>>20 + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", "", Options{})
	defer c.CloseIdleConnections()
	_, err := c.Complete(context.Background(), &provider.Request{Model: "m"})
	if !errors.Is(err, provider.ErrMalformed) {
		t.Errorf("got %v, want an error wrapping ErrMalformed", err)
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

// Options.HTTP2 speaks h2c by prior knowledge to an http:// base URL, and
// the stream's events arrive through the HTTP/2 body as through HTTP/1.1.
func TestHTTP2PriorKnowledge(t *testing.T) {
	tests := []struct {
		name      string
		http2     bool
		wantMajor int
	}{
		{"http/1.1 by default", false, 1},
		{"h2c with http2", true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Proto-Major", strconv.Itoa(r.ProtoMajor))
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte("data: {\"choices\":[]}\n\ndata: [DONE]\n\n"))
			}))
			var p http.Protocols
			p.SetHTTP1(true)
			p.SetUnencryptedHTTP2(true)
			srv.Config.Protocols = &p
			srv.Start()
			defer srv.Close()
			c := New(srv.URL+"/v1", "", Options{HTTP2: tt.http2})
			defer c.CloseIdleConnections()
			resp, err := c.post(context.Background(), &provider.Request{Model: "m", Stream: true}, c.url, []byte(`{"model":"m","stream":true}`), true)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := resp.Header.Get("X-Proto-Major"); got != strconv.Itoa(tt.wantMajor) {
				t.Errorf("server saw HTTP/%s, want HTTP/%d", got, tt.wantMajor)
			}
			st := &stream{body: resp.Body, r: sse.NewReader(resp.Body, 0), ctx: context.Background()}
			if ev, err := st.Next(); err != nil || string(ev.Data) != `{"choices":[]}` {
				t.Fatalf("got event %v, %v; want the chunk", ev, err)
			}
			if _, err := st.Next(); err != io.EOF {
				t.Errorf("got %v, want io.EOF after [DONE]", err)
			}
		})
	}
}

// An https base URL ignores HTTP2 (ALPN decides), so a TLS server without
// h2 is still reached over HTTP/1.1.
func TestHTTP2IgnoredForHTTPS(t *testing.T) {
	c := New("https://example.invalid/v1", "", Options{HTTP2: true})
	tr := c.call.RT.(*http.Transport)
	if tr.Protocols != nil {
		t.Errorf("got protocols %v for an https base URL, want the default (nil)", tr.Protocols)
	}
}

// The transport's read buffer is small (1 KiB, see NewTransport); a response
// header and a stream line many times its size still arrive whole.
func TestLinesLongerThanReadBuffer(t *testing.T) {
	header := strings.Repeat("h", 16<<10)
	content := strings.Repeat("가", 20<<10) // 60 KiB of multi-byte UTF-8
	chunk := `{"choices":[{"index":0,"delta":{"content":"` + content + `"}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Long", header)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: " + chunk + "\n\ndata: [DONE]\n\n"))
	}))
	defer srv.Close()
	c := New(srv.URL+"/v1", "", Options{})
	defer c.CloseIdleConnections()
	st, err := c.Open(context.Background(), &provider.Request{Model: "m", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, err := st.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.Data) != chunk {
		t.Errorf("got a chunk of %d bytes, want the %d sent", len(ev.Data), len(chunk))
	}
	if _, err := st.Next(); err != io.EOF {
		t.Errorf("got %v, want io.EOF after [DONE]", err)
	}

	resp, err := c.post(context.Background(), &provider.Request{Model: "m", Stream: true}, c.url, []byte(`{"model":"m","stream":true}`), true)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Long"); got != header {
		t.Errorf("got a header of %d bytes, want %d", len(got), len(header))
	}
}

func TestEmbeddingsBody(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"model":"alias","input":["a","b"],"dimensions":8,"x":{"y":[1]}}`, `{"model":"up","input":["a","b"],"dimensions":8,"x":{"y":[1]}}`},
		{`{"input":"a","model":"alias"}`, `{"model":"up","input":"a"}`},
		{``, `{"model":"up"}`},
	} {
		got, err := EmbeddingsBody(&provider.Request{Model: "up", Body: []byte(tt.body)})
		if err != nil || string(got) != tt.want {
			t.Errorf("EmbeddingsBody(%s) = %s, %v; want %s", tt.body, got, err, tt.want)
		}
	}
}
