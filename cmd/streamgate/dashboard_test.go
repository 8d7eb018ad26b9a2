package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// serve wires the dashboard: open on its loopback address, and the cost of
// the day read from its ledger; an open page does not hold the shutdown.
func TestServeDashboard(t *testing.T) {
	defer goleak.VerifyNone(t)
	// --grace 1m: a page that held the drain would show.
	p := serveInProcess(t, "1m")
	if status, body := p.stream(t); status != 200 {
		t.Fatalf("stream: got %d %q, want 200", status, body)
	}
	url := p.url

	// The ledger is asked every 5 s: read events until the key's row is in.
	pctx, stopPage := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopPage()
	req, _ := http.NewRequestWithContext(pctx, "GET", url+"/dashboard/events", nil)
	resp, err := http.DefaultClient.Do(req)
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

	if code := p.shutdown(t, 20*time.Second, "only a dashboard page was open (grace 1m)"); code != 0 {
		t.Errorf("got exit %d, want 0; stderr %q", code, p.stderr.String())
	}
	http.DefaultClient.CloseIdleConnections()
}
