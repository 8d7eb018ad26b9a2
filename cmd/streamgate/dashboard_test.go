package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"math"
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

// A dashboard opened after traffic shows it: the hour kept in memory (no
// page was open while the requests ran), the ledger's history, errors by
// kind with the gateway's refusals apart, unknown model names in one row,
// and the request log finds a request by the id the client got back.
func TestServeDashboardMemory(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := serveInProcess(t, "1s")
	send := func(model, key, id string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(
			`{"model":"`+model+`","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Sim-TTFT", "1ms")
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	ok := send("sim-fast", p.key, "find-me-42")
	if ok.StatusCode != 200 || ok.Header.Get("X-Request-Id") != "find-me-42" {
		t.Fatalf("stream: got %d with X-Request-Id %q, want 200 echoing find-me-42", ok.StatusCode, ok.Header.Get("X-Request-Id"))
	}
	returned := send("sim-fast", p.key, "").Header.Get("X-Request-Id")
	for _, m := range []string{"sim-typo", "llama-3-typo"} { // names the default's aliases (claude-*, gpt-*, o3*, gemini-*…) do not catch
		if resp := send(m, p.key, ""); resp.StatusCode != 404 {
			t.Fatalf("unknown model %s: got %d, want 404", m, resp.StatusCode)
		}
	}
	if resp := send("sim-fast", "sk-wrong", ""); resp.StatusCode != 401 {
		t.Fatalf("wrong key: got %d, want 401", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(p.link)
	if err != nil || len(resp.Cookies()) != 1 {
		t.Fatalf("login link: %v, cookies %v", err, resp.Cookies())
	}
	resp.Body.Close()
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	getJSON := func(path string, v any) int {
		t.Helper()
		req, _ := http.NewRequest("GET", p.url+path, nil)
		req.Header.Set("Cookie", cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return resp.StatusCode
	}
	sum := func(s []*float64, step float64) float64 {
		total := 0.0
		for _, v := range s {
			if v != nil {
				total += *v * step
			}
		}
		return total
	}
	type history struct {
		Source   string
		StepS    float64    `json:"step_s"`
		Requests []*float64 `json:"requests_per_s"`
		Rejected []*float64 `json:"rejected_per_s"`
		Errors   []*float64 `json:"errors_per_s"`
	}
	// The sampler runs once a second from the start, page or not: wait
	// for the one after the requests.
	var h history
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code := getJSON("/dashboard/history?range=1h", &h); code != 200 {
			t.Fatalf("history: got %d", code)
		}
		if sum(h.Requests, h.StepS) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if h.Source != "memory" || len(h.Requests) != 360 || sum(h.Requests, h.StepS) < 5-0.01 || sum(h.Rejected, h.StepS) < 3-0.01 || sum(h.Errors, h.StepS) != 0 {
		t.Fatalf("last hour: got source %q, %d points, %.2f requests, %.2f rejected, %.2f errors; want memory, 360, 5, 3, 0",
			h.Source, len(h.Requests), sum(h.Requests, h.StepS), sum(h.Rejected, h.StepS), sum(h.Errors, h.StepS))
	}

	// The ledger is written in batches: wait for the request's entry.
	type logPage struct {
		Requests []struct {
			RequestID string `json:"request_id"`
			Key       string
			Model     string
			Route     string
			Status    int
			Outcome   string
			TTFTMs    *float64 `json:"ttft_ms"`
		}
		More bool
	}
	var lp logPage
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code := getJSON("/dashboard/requests?q=find-me-42", &lp); code != 200 {
			t.Fatalf("request log: got %d", code)
		}
		if len(lp.Requests) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(lp.Requests) != 1 || lp.Requests[0].Status != 200 || lp.Requests[0].Key != "dev" || lp.Requests[0].Model != "sim-fast" ||
		lp.Requests[0].Route == "" || lp.Requests[0].TTFTMs == nil {
		t.Fatalf("request find-me-42: got %+v, want one ok entry of key dev on sim-fast with its route and TTFT", lp.Requests)
	}
	if getJSON("/dashboard/requests?request_id="+returned, &lp); len(lp.Requests) != 1 {
		t.Errorf("the generated request id %q: got %d entries, want 1", returned, len(lp.Requests))
	}
	if getJSON("/dashboard/requests?q=404", &lp); len(lp.Requests) != 2 {
		t.Errorf("status 404: got %d entries, want the 2 unknown models", len(lp.Requests))
	}
	if getJSON("/dashboard/requests?limit=2", &lp); len(lp.Requests) != 2 || !lp.More {
		t.Errorf("a page of 2: got %d entries, more %v; want 2 and more", len(lp.Requests), lp.More)
	}
	var bad struct{ Error struct{ Message string } }
	if code := getJSON("/dashboard/requests?status=abc", &bad); code != 400 || !strings.Contains(bad.Error.Message, "status") {
		t.Errorf("status=abc: got %d %q, want 400 naming status", code, bad.Error.Message)
	}
	var day history
	if code := getJSON("/dashboard/history?range=24h", &day); code != 200 || day.Source != "ledger" || math.Abs(sum(day.Requests, day.StepS)-5) > 0.01 {
		t.Errorf("24h: got %d from %q with %.2f requests, want 200 from the ledger with 5", code, day.Source, sum(day.Requests, day.StepS))
	}

	// A page opened now: the refusals by code, no error, one unknown row.
	pctx, stopPage := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopPage()
	req, _ := http.NewRequestWithContext(pctx, "GET", p.url+"/dashboard/events?window=5m", nil)
	req.Header.Set("Cookie", cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := bufio.NewScanner(resp.Body)
	events.Buffer(nil, 1<<20)
	type kind struct {
		Kind  string
		Count float64
	}
	var ev struct {
		Replica  string
		Grafana  string
		Errors   []kind `json:"errors_by_kind"`
		Rejected []kind `json:"rejected_by_code"`
		Models   []struct{ Model string }
		Routes   []struct {
			Route    string
			Attempts *float64
		}
	}
	for events.Scan() {
		if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	codes := map[string]float64{}
	for _, k := range ev.Rejected {
		codes[k.Kind] = k.Count
	}
	if codes["404"] != 2 || codes["401"] != 1 || len(ev.Errors) != 0 {
		t.Errorf("errors by kind: got rejected %v and errors %v, want 404×2 and 401×1 rejected, no error", codes, ev.Errors)
	}
	unknown := 0
	for _, m := range ev.Models {
		if strings.Contains(m.Model, "typo") {
			t.Errorf("model %q has a row of its own", m.Model)
		}
		if m.Model == "(unknown model)" {
			unknown++
		}
	}
	if unknown != 1 {
		t.Errorf("got %d (unknown model) rows in %+v, want 1", unknown, ev.Models)
	}
	if ev.Replica == "" || ev.Grafana == "" {
		t.Errorf("got replica %q grafana %q, want both", ev.Replica, ev.Grafana)
	}
	attempts := 0.0
	for _, r := range ev.Routes {
		if r.Attempts != nil {
			attempts += *r.Attempts
		}
	}
	if attempts < 2 {
		t.Errorf("routes: got %.0f attempts over the window, want the 2 streams'", attempts)
	}
	stopPage()
	if code := p.shutdown(t, 20*time.Second, "after the dashboard test"); code != 0 {
		t.Errorf("got exit %d, want 0; stderr %q", code, p.stderr.String())
	}
	http.DefaultClient.CloseIdleConnections()
}
