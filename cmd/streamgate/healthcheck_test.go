package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHealthcheck: exit 0 on a 2xx readiness answer (degraded included), 1
// on 503 or no answer, 2 on a bad --url; one line saying what it saw.
func TestHealthcheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/ready":
			w.Write([]byte(`{"status":"ready","replica":"gw-1"}`))
		case "/degraded":
			w.Write([]byte(`{"status":"degraded","replica":"gw-1","reason":"usage store unreachable"}`))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"status":"not_ready","replica":"gw-1","reason":"buffer is full"}`))
		}
	}))
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		out, errIn string
	}{
		{"ready", []string{"--url", srv.URL + "/ready"}, 0, "ready (replica gw-1): HTTP 200 ready", ""},
		{"degraded is ready", []string{"--url", srv.URL + "/degraded"}, 0, "HTTP 200 degraded: usage store unreachable", ""},
		{"not ready", []string{"--url", srv.URL + "/down"}, 1, "", "not ready (replica gw-1): HTTP 503 not_ready: buffer is full"},
		{"no answer", []string{"--url", deadURL + "/readyz", "--timeout", "1s"}, 1, "", "healthcheck " + deadURL},
		{"bad url", []string{"--url", "localhost:8080"}, 2, "", "want an http:// or https:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, nil, append([]string{"healthcheck"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stdout, tc.out) || !strings.Contains(stderr, tc.errIn) {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout, stderr, tc.code, tc.out, tc.errIn)
			}
		})
	}
}
