package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// serve wires the dashboard: on the embedded default (loopback, no
// admin_key) it asks for a login, and the printed login link logs in once;
// the cost of the day is read from its ledger; an open page does not hold
// the shutdown.
func TestServeDashboard(t *testing.T) {
	defer goleak.VerifyNone(t)
	// --grace 1m: a page that held the drain would show.
	p := serveInProcess(t, "1m")
	if status, body := p.stream(t); status != 200 {
		t.Fatalf("stream: got %d %q, want 200", status, body)
	}
	url := p.url
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	// Loopback, a loopback Host, no forwarding header: still a login.
	if resp := get(url + "/dashboard/events"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("events without login: got %d, want 401", resp.StatusCode)
	}
	resp := get(p.link)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" || len(resp.Cookies()) != 1 {
		t.Fatalf("the login link: got %d to %q with cookies %v, want 303 to /dashboard and the login cookie",
			resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	if again := get(p.link); again.StatusCode != http.StatusUnauthorized || len(again.Cookies()) != 0 {
		t.Errorf("the login link again: got %d with cookies %v, want 401 and none", again.StatusCode, again.Cookies())
	}

	// The ledger is asked every 5 s: read events until the key's row is in.
	pctx, stopPage := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopPage()
	req, _ := http.NewRequestWithContext(pctx, "GET", url+"/dashboard/events", nil)
	req.Header.Set("Cookie", cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("got %d, want the event stream after the login", resp.StatusCode)
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
	if !found || ev.Auth != "login" {
		t.Fatalf("got auth %q cost %+v (%v), want login and key dev's request of today", ev.Auth, ev.Cost, events.Err())
	}

	if code := p.shutdown(t, 20*time.Second, "only a dashboard page was open (grace 1m)"); code != 0 {
		t.Errorf("got exit %d, want 0; stderr %q", code, p.stderr.String())
	}
	http.DefaultClient.CloseIdleConnections()
}
