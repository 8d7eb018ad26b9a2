package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sse"
)

// TestManyStreams opens 1,000 concurrent streams and checks each one ends
// with [DONE] and all its tokens.
func TestManyStreams(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 100
	}
	p := Profile{Name: "load", TTFT: 50 * time.Millisecond, ITL: 10 * time.Millisecond, Tokens: 10}
	s := New(Options{Profile: p})
	ts := httptest.NewServer(s)
	defer ts.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"load","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`))
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			r := sse.NewReader(resp.Body, 0)
			var usage api.Usage
			for {
				ev, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					errs <- err
					return
				}
				var c api.Chunk
				if json.Unmarshal(ev.Data, &c) == nil && c.Usage != nil {
					usage = *c.Usage
				}
			}
			if usage.CompletionTokens != 10 {
				errs <- io.ErrShortBuffer
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if first == nil {
			first = err
		}
		failed++
	}
	if failed > 0 {
		t.Fatalf("streams: %d of %d failed, first: %v", failed, n, first)
	}
	// The handler counts a stream after its last write, so the client may
	// see [DONE] a moment before the counter moves.
	waitMetric(t, s, "streamgate_sim_streams_completed_total", float64(n))
}

// BenchmarkStream measures whole streams over loopback, client included:
// 1,000 chunks a stream with no waits, so the figure is the CPU of building,
// writing and reading a chunk. ns/chunk and allocs/chunk are reported.
func BenchmarkStream(b *testing.B) {
	const tokens = 1000
	ts := httptest.NewServer(New(Options{Profile: Profile{Name: "bench", Tokens: tokens}}))
	defer ts.Close()
	client := ts.Client()
	body := `{"model":"bench","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	var r *sse.Reader
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		if r == nil {
			r = sse.NewReader(resp.Body, 0)
		} else {
			r.Reset(resp.Body)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		resp.Body.Close()
		if n != tokens+2 {
			b.Fatalf("events: got %d, want %d", n, tokens+2)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/chunk")
}
