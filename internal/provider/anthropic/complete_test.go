package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/openai"
)

// TestCompleteGolden answers Complete over loopback HTTP with each
// testdata/complete/*.json Message and compares the chat.completion the
// gateway gets with its .golden.json.
func TestCompleteGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "complete", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, in := range files {
		if strings.HasSuffix(in, ".golden.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			got, err := c.Complete(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), false))
			if err != nil {
				t.Fatal(err)
			}
			// The gateway reads the usage of the answer as api.Completion.
			var comp api.Completion
			if err := json.Unmarshal(got, &comp); err != nil || comp.Object != "chat.completion" || len(comp.Choices) != 1 || comp.Usage == nil {
				t.Fatalf("got %s (%v), want a chat.completion with one choice and usage", got, err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			out.WriteByte('\n')
			golden(t, strings.TrimSuffix(in, ".json")+".golden.json", out.Bytes())
		})
	}
}

func TestCompleteMalformed(t *testing.T) {
	tests := []struct {
		name string
		body string
		want error // a sentinel, or nil for a *provider.Error
	}{
		{"not JSON", `{"id":`, provider.ErrMalformed},
		{"not a message", `{"type":"completion","completion":"hi"}`, provider.ErrMalformed},
		{"an error object with 200", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tt.body)) }))
			defer srv.Close()
			c := newTestClient(t, srv.URL)
			_, err := c.Complete(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), false))
			var perr *provider.Error
			switch {
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("got %v, want an error wrapping %v", err, tt.want)
			case tt.want == nil && (!errors.As(err, &perr) || perr.Status != StatusOverloaded || !perr.Retryable):
				t.Errorf("got %v, want a retryable 529 *provider.Error", err)
			}
		})
	}
}

// A non-streaming answer larger than openai.MaxCompleteBody is an error,
// not an unbounded read into memory.
func TestCompleteBodyLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range openai.MaxCompleteBody>>20 + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	_, err := c.Complete(context.Background(), chatRequest(t, []byte(`{"messages":[{"role":"user","content":"hi"}]}`), false))
	if !errors.Is(err, provider.ErrMalformed) {
		t.Errorf("got %v, want an error wrapping ErrMalformed", err)
	}
}
