//go:build unix

package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
	"github.com/streamgate/streamgate/internal/provider"
	popenai "github.com/streamgate/streamgate/internal/provider/openai"
)

// eventsTransport answers every stream with the canned stream of n
// content chunks, one event per Read of its body, as an upstream pacing
// its tokens delivers them: each is relayed and flushed on its own.
type eventsTransport struct{ n int }

func (t eventsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	events := bytes.SplitAfter(cannedStream(t.n), []byte("\n\n"))
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(&eventReader{events: events}), Request: r}, nil
}

type eventReader struct{ events [][]byte }

func (e *eventReader) Read(p []byte) (int, error) {
	for len(e.events) > 0 && len(e.events[0]) == 0 {
		e.events = e.events[1:]
	}
	if len(e.events) == 0 {
		return 0, io.EOF
	}
	n := copy(p, e.events[0])
	e.events[0] = e.events[0][n:]
	return n, nil
}

// BenchmarkLoopbackCPU is the process's CPU time (user + system, from
// getrusage) per stream of 1 and of 100 content chunks, each relayed on
// its own, from an in-memory upstream through the gateway over loopback
// HTTP to a client reading it whole, for a chat client and a Responses
// client of the same route: the difference of the two divided by 99 is
// the CPU per relayed chunk, socket writes included (cpu-ns/op).
func BenchmarkLoopbackCPU(b *testing.B) {
	for _, api := range []string{"chat", "responses"} {
		for _, n := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/%d", api, n), func(b *testing.B) {
				cfg := &config.Config{
					Timeouts:  config.Timeouts{Connect: config.Duration(time.Second), FirstToken: config.Duration(30 * time.Second), Idle: config.Duration(30 * time.Second)},
					Providers: []config.Provider{{Name: "mem", Kind: "openai", BaseURL: "http://upstream.invalid/v1"}},
					Keys:      []config.Key{{Name: "bench", Key: "sg-bench-0123456789abcdef"}},
					Models:    []config.Model{{Name: "m", Routes: []config.Route{{Provider: "mem", Model: "m-up"}}, Price: config.Price{Input: 1, Output: 2}}},
				}
				gw, err := gateway.New(gateway.Options{Config: cfg, KeepAlive: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
					Providers: map[string]provider.Provider{"mem": popenai.New("http://upstream.invalid/v1", "", popenai.Options{Transport: eventsTransport{n}})}})
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(gw)
				defer func() { srv.Close(); gw.Close() }()
				path, body := "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"Write a haiku about latency."}]}`
				if api == "responses" {
					path, body = "/v1/responses", `{"model":"m","stream":true,"input":"Write a haiku about latency."}`
				}
				loopbackCPU(b, srv, path, body)
			})
		}
	}
	// The floor: net/http's reverse proxy in the gateway's place, the same
	// in-memory upstream, client and stream.
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("reverseproxy/%d", n), func(b *testing.B) {
			rp := &httputil.ReverseProxy{Transport: eventsTransport{n}, Rewrite: func(r *httputil.ProxyRequest) {
				r.Out.URL.Scheme, r.Out.URL.Host = "http", "upstream.invalid"
			}}
			srv := httptest.NewServer(rp)
			defer srv.Close()
			loopbackCPU(b, srv, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"Write a haiku about latency."}]}`)
		})
	}
}

// loopbackCPU posts body to srv's path b.N times, reading each answer
// whole, and reports the process's CPU time per request (cpu-ns/op).
func loopbackCPU(b *testing.B, srv *httptest.Server, path, body string) {
	client := srv.Client()
	do := func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sg-bench-0123456789abcdef")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do()
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for b.Loop() {
		do()
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
