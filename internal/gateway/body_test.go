package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// rawRequest writes a request's head and the first part of its body on a
// new connection to the gateway at url, leaving the rest unsent: a client
// that drips (or stalls) its body. It returns the connection and a reader
// of the answer; the connection is closed at cleanup. A read that waits
// longer than a minute fails the test instead of hanging it.
func rawRequest(t *testing.T, url, head, first string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Minute)) // a hang guard, not a timing check
	if _, err := io.WriteString(c, head+first); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// head is a POST head for path with the given extra header lines.
func head(path string, lines ...string) string {
	h := "POST " + path + " HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
	for _, l := range lines {
		h += l + "\r\n"
	}
	return h + "\r\n"
}

// TestUnreadBodyAnsweredAtOnce: a request refused before its body is read
// (no key, a wrong key, a Content-Length over the limit) is answered while
// the client still holds back its body, and the connection is closed
// instead of read on. Before, net/http read up to 256 KiB of the body
// before writing the answer: a client dripping it waited for good.
func TestUnreadBodyAnsweredAtOnce(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 1 << 20
	e := start(t, cfg)
	for _, tc := range []struct {
		name   string
		lines  []string
		status int
	}{
		{"no key", []string{"Content-Length: 100000"}, http.StatusUnauthorized},
		{"wrong key", []string{"Content-Length: 100000", "Authorization: Bearer sk-wrong"}, http.StatusUnauthorized},
		{"over the limit", []string{"Content-Length: 20000000", "Authorization: Bearer " + devKey}, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, br := rawRequest(t, e.url, head("/v1/chat/completions", tc.lines...), `{"model":"m-sim",`)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("got status %d, want %d", resp.StatusCode, tc.status)
			}
			if !resp.Close {
				t.Errorf("got a connection kept open, want Connection: close (the body is unread)")
			}
			readError(t, resp)
			// The gateway closes its side: the rest of the body is not read.
			if _, err := io.Copy(io.Discard, br); err != nil {
				t.Fatalf("got %v after the answer, want EOF", err)
			}
		})
	}
	e.waitEntries(t, 3)
}

// TestBodyDeadline: a body that does not arrive within
// timeouts.request_body is answered 408 and leaves one usage entry; a body
// that did arrive does not bound the stream that follows (the deadline is
// lifted once the body is read).
func TestBodyDeadline(t *testing.T) {
	cfg := baseConfig()
	cfg.Timeouts.RequestBody = config.Duration(300 * time.Millisecond)
	cfg.Timeouts.Idle = config.Duration(5 * time.Second)
	e := start(t, cfg)

	_, br := rawRequest(t, e.url, head("/v1/chat/completions", "Content-Length: 2000", "Authorization: Bearer "+devKey), `{"model":"m-sim",`)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("got status %d, want 408", resp.StatusCode)
	}
	if got := *readError(t, resp).Error.Code; got != "request_body_timeout" {
		t.Errorf("got code %q, want request_body_timeout", got)
	}
	resp.Body.Close()
	if got := e.waitEntries(t, 1)[0]; got.Status != http.StatusRequestTimeout || got.Outcome != "rejected" {
		t.Errorf("got entry status %d outcome %q, want 408 rejected", got.Status, got.Outcome)
	}

	// A stream four times as long as the body's deadline ends complete.
	resp = do(t, http.MethodPost, e.url+"/v1/chat/completions", devKey, chatBody("m-sim", true, ""),
		"X-Sim-ITL", "300ms", "X-Sim-Tokens", "4")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200", resp.StatusCode)
	}
	if _, done := readStream(t, resp); !done {
		t.Fatal("the stream ended without [DONE]: the body's deadline cut it")
	}
	if got := e.waitEntries(t, 2)[1]; got.Outcome != "ok" {
		t.Errorf("got outcome %q, want ok", got.Outcome)
	}
}

// TestDecodingBudget: with max_decoding_bytes of large bodies being read, a
// further large body waits, then gets 503 gateway_busy with Retry-After; a
// small body is not held up; once the first body arrives, it is served.
func TestDecodingBudget(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 200 << 10
	cfg.MaxDecodingBytes = 200 << 10
	e := start(t, cfg)

	body := chatBody("m-sim", false, `,"user":"`+strings.Repeat("x", 150<<10)+`"`)
	c1, br1 := rawRequest(t, e.url, head("/v1/chat/completions", fmt.Sprintf("Content-Length: %d", len(body)), "Authorization: Bearer "+devKey), body[:10])

	// The first request holds 150 KiB of the budget's 200 while its body
	// comes; wait until the gateway has taken it.
	var resp *http.Response
	for range 100 {
		resp = do(t, http.MethodPost, e.url+"/v1/chat/completions", devKey, body)
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("got status %d, want 503 while the budget is taken", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("got Retry-After %q, want 1", got)
	}
	if got := *readError(t, resp).Error.Code; got != "gateway_busy" {
		t.Errorf("got code %q, want gateway_busy", got)
	}
	if m := scrape(t, e.url); !strings.Contains(m, `streamgate_admission_rejected_total{scope="decoding"} 1`) {
		t.Errorf("want one decoding refusal counted in /metrics")
	}

	// A small body does not wait.
	if resp := do(t, http.MethodPost, e.url+"/v1/chat/completions", devKey, chatBody("m-sim", false, "")); resp.StatusCode != http.StatusOK {
		t.Errorf("small body: got status %d, want 200", resp.StatusCode)
	}

	// The first body arrives: it is served.
	if _, err := io.WriteString(c1, body[10:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br1, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("first request: got status %d, want 200", resp.StatusCode)
	}
}

// TestDecodingBudgetConcurrent: many large bodies at once never fail for
// anything but the budget, and each leaves one usage entry.
func TestDecodingBudgetConcurrent(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxBody = 200 << 10
	cfg.MaxDecodingBytes = 400 << 10
	e := start(t, cfg)
	body := chatBody("m-sim", false, `,"user":"`+strings.Repeat("x", 150<<10)+`"`)
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+devKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK && s != http.StatusServiceUnavailable {
			t.Errorf("request %d: got status %d, want 200 or 503", i, s)
		}
	}
	e.waitEntries(t, len(statuses))
}

// TestChunkedBodyOverLimit: a chunked body is cut at the limit: 413, and
// the connection is closed rather than read on.
func TestChunkedBodyOverLimit(t *testing.T) {
	e := start(t, baseConfig()) // max_body_bytes 4096
	chunk := strings.Repeat("x", 5000)
	_, br := rawRequest(t, e.url, head("/v1/chat/completions", "Transfer-Encoding: chunked", "Authorization: Bearer "+devKey),
		fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("got status %d, want 413", resp.StatusCode)
	}
	if !resp.Close {
		t.Errorf("got a connection kept open, want Connection: close")
	}
	e.waitEntries(t, 1)
}
