package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// serve wires the dashboard: open on its loopback address, and the cost of
// the day read from its ledger; an open page does not hold the shutdown.
func TestServeDashboard(t *testing.T) {
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
		// --grace 1m: a page that held the drain would show.
		code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--grace", "1m", "--log-level", "warn"}, getenv, pw, &stderr)
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
	if key == "" || url == "" {
		t.Fatalf("got key %q url %q, want both; stderr %q", key, url, stderr.String())
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
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	// The ledger is asked every 5 s: read events until the key's row is in.
	pctx, stopPage := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopPage()
	req, _ = http.NewRequestWithContext(pctx, "GET", url+"/dashboard/events", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("got %d, want the event stream open on a loopback address", resp.StatusCode)
	}
	type row struct {
		Group    string
		Requests int64
	}
	var ev struct {
		Auth string
		Cost *struct {
			ByKey []row `json:"by_key"`
		} `json:"cost_today"`
	}
	found := false
	events := bufio.NewScanner(resp.Body)
	events.Buffer(nil, 1<<20)
	for !found && events.Scan() {
		data, ok := strings.CutPrefix(events.Text(), "data: ")
		if !ok {
			continue
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		found = ev.Cost != nil && len(ev.Cost.ByKey) == 1 && ev.Cost.ByKey[0].Group == "dev" && ev.Cost.ByKey[0].Requests == 1
	}
	if !found || ev.Auth != "open" {
		t.Fatalf("got auth %q cost %+v (%v), want open and key dev's request of today", ev.Auth, ev.Cost, events.Err())
	}

	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("got exit %d, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve still draining 20s after its context ended with only a dashboard page open (grace 1m)")
	}
	http.DefaultClient.CloseIdleConnections()
}
