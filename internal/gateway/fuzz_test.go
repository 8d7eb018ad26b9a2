package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/sse"
)

// FuzzRelay drives the whole gateway with upstream bytes from the fuzzer: an
// upstream answers 200 text/event-stream with the fuzzer's body, and a
// client streams through a running gateway. Whatever the bytes, the process
// survives (a panic or a stack overflow fails the run), the client gets
// either an OpenAI error object or a stream with one well-formed end (the
// "[DONE]" sentinel, or exactly one error event, last, and no "[DONE]"), and
// every request leaves exactly one usage entry.
func FuzzRelay(f *testing.F) {
	for _, seed := range []string{
		"data: " + chunkHi + "\n\ndata: [DONE]\n\n",
		"data: " + chunkHi + "\n\ndata: [DONE]\n",
		"\xEF\xBB\xBFdata: " + chunkHi + "\r\n\r\ndata: [DONE]\r\n\r\n",
		"data: " + chunkHi + "\r\rdata:[DONE]\r\r",
		": ping\n\ndata: " + chunkHi + "\n\ndata:\n\ndata: " + chunkStop + "\n\ndata: [DONE]\n\n",
		"data: " + chunkHi + "\n\ndata: {\"a",
		"data: " + chunkHi + "\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n",
		"data: {\"error\":{\"message\":\"boom\"}}\n\n",
		"event: x\n\ndata: " + chunkHi + "\n\n",
		"data: {\"x\":" + strings.Repeat("[", 300) + "\n\n",
		"data: " + chunkHi + "\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":2.0,\"completion_tokens\":1e0}}\n\ndata: [DONE]\n\n",
		"data: [1]\n\n",
		"data: [DONE]\n\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	var body atomic.Pointer[[]byte]
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sse.SetHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		w.Write(*body.Load())
	}))
	f.Cleanup(up.Close)
	cfg := baseConfig()
	cfg.Timeouts.FirstToken = config.Duration(2 * time.Second)
	cfg.Timeouts.Idle = config.Duration(2 * time.Second)
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "fuzz", Kind: "openai", BaseURL: up.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "fz", Routes: []config.Route{{Provider: "fuzz", Model: "x"}}, Price: config.Price{Input: 1, Output: 1}})
	e := startWith(f, gateway.Options{Config: cfg, KeepAlive: -1})
	requests := 0
	f.Fuzz(func(t *testing.T, b []byte) {
		body.Store(&b)
		resp := do(t, "POST", e.url+"/v1/chat/completions", devKey, chatBody("fz", true, ""))
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading the gateway's answer: %v", err)
		}
		requests++
		if resp.StatusCode != http.StatusOK {
			var er api.ErrorResponse
			if json.Unmarshal(raw, &er) != nil || er.Error.Message == "" {
				t.Fatalf("got %d %q, want an OpenAI error object", resp.StatusCode, raw)
			}
		} else {
			checkOneEnd(t, raw)
		}
		entries := e.waitEntries(t, requests)
		if got := entries[len(entries)-1]; got.Status != resp.StatusCode {
			t.Errorf("got entry status %d, the client got %d", got.Status, resp.StatusCode)
		}
	})
}

// checkOneEnd checks a gateway stream ends once: "[DONE]" with no error
// event, or one error event, last, without "[DONE]".
func checkOneEnd(t *testing.T, raw []byte) {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(raw), 0)
	errorEvents, afterError := 0, 0
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			if errorEvents > 0 {
				t.Fatalf("got [DONE] after an error event: %q", raw)
			}
			if end := []byte("data: [DONE]\n\n"); !bytes.Equal(raw, end) && !bytes.HasSuffix(raw, append([]byte("\n\n"), end...)) {
				t.Fatalf("got bytes after [DONE]: %q", raw)
			}
			return
		}
		if err != nil {
			if errorEvents != 1 || afterError != 0 {
				t.Fatalf("stream ended (%v) with %d error events and %d events after one, want exactly one error event, last: %q", err, errorEvents, afterError, raw)
			}
			return
		}
		if len(ev.Data) == 0 {
			continue
		}
		if errorEvents > 0 {
			afterError++
		}
		if info, err := api.ScanChunk(ev.Data); err != nil {
			t.Fatalf("the gateway sent a malformed event %q: %v", ev.Data, err)
		} else if info.Error {
			errorEvents++
		}
	}
}
