package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/usage"
)

// serve on the embedded default: the dev key and the address are printed,
// a stream goes through the in-process sim, and on shutdown the ledger holds
// its entry.
func TestServeDefault(t *testing.T) {
	defer goleak.VerifyNone(t)
	db := "sqlite://" + filepath.Join(t.TempDir(), "ledger.db")
	getenv := func(k string) string {
		if k == "STREAMGATE_DATABASE" {
			return db
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	exit := make(chan int, 1)
	go func() {
		code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--grace", "1s", "--log-level", "warn"}, getenv, pw, &stderr)
		pw.Close()
		exit <- code
	}()
	sc := bufio.NewScanner(pr)
	var key, url string
	for url == "" && sc.Scan() {
		line := sc.Text()
		if k, ok := strings.CutPrefix(line, "streamgate: development key (shown once): "); ok {
			key = k
		}
		if u, ok := strings.CutPrefix(line, "streamgate: listening on "); ok {
			url = u
		}
	}
	go io.Copy(io.Discard, pr)
	if key == "" || url == "" || strings.HasSuffix(url, ":0") {
		t.Fatalf("got key %q url %q, want both printed with the real port; stderr %q", key, url, stderr.String())
	}

	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(
		`{"model":"sim-fast","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Sim-TTFT", "1ms")
	req.Header.Set("X-Sim-ITL", "1ms")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != 200 || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Fatalf("got %d %q, want a complete stream", resp.StatusCode, body)
	}

	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("got exit %d, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
	store, err := usage.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.List(context.Background(), usage.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].KeyID != "dev" || entries[0].Outcome != usage.OutcomeOK || entries[0].OutputTokens != 3 {
		t.Errorf("got ledger %+v, want one ok entry of key dev with 3 output tokens", entries)
	}
}

func TestServeUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad log level", []string{"--log-level", "loud"}, "--log-level"},
		{"negative grace", []string{"--grace", "-1s"}, "--grace"},
		{"extra argument", []string{"extra"}, "extra"},
		{"address without port", []string{"--addr", "nope"}, "--addr"},
		{"pprof address without port", []string{"--pprof", "localhost"}, "--pprof"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), append([]string{"serve"}, tt.args...), func(string) string { return "" }, &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tt.want) {
				t.Errorf("got exit %d stderr %q, want 2 naming %s", code, errb.String(), tt.want)
			}
		})
	}
}
