package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/sim"
)

func TestSimUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // the flag the message must name
	}{
		{"bad duration", []string{"--ttft", "soon"}, "--ttft"},
		{"negative itl", []string{"--itl", "-1ms"}, "itl"},
		{"jitter out of range", []string{"--itl-jitter", "-1"}, "itl-jitter"},
		{"p99 below median", []string{"--ttft", "1s", "--ttft-p99", "10ms"}, "ttft-p99"},
		{"unknown profile", []string{"--profile", "gpt-9"}, "--profile"},
		{"bad lang", []string{"--lang", "fr"}, "lang"},
		{"bad fail status", []string{"--fail-status", "200"}, "fail-status"},
		{"rate above 1", []string{"--cut-rate", "1.5"}, "cut-rate"},
		{"zero tokens", []string{"--tokens", "0"}, "--tokens"},
		{"negative concurrency", []string{"--max-concurrency", "-1"}, "--max-concurrency"},
		{"bad addr", []string{"--addr", "nowhere"}, "--addr"},
		{"extra argument", []string{"extra"}, "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb strings.Builder
			code := run(context.Background(), append([]string{"sim"}, tt.args...), func(string) string { return "" }, &out, &errb)
			if code != 2 {
				t.Fatalf("exit: got %d, want 2 (stderr %q)", code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) {
				t.Errorf("stderr: got %q, want it to name %s", errb.String(), tt.want)
			}
		})
	}
}

// sim --help lists the endpoints of the three dialects and the headers.
func TestSimHelp(t *testing.T) {
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"sim", "--help"}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("exit: got %d, want 0 (stderr %q)", code, errb.String())
	}
	for _, want := range []string{"/v1/chat/completions", "/v1/messages", ":generateContent", ":streamGenerateContent?alt=sse",
		"/v1/embeddings", sim.HeaderToolCall, sim.HeaderFailStatus, "message_stop", "finishReason"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sim --help does not name %s", want)
		}
	}
}

func TestSimFlagsOverrideProfiles(t *testing.T) {
	fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
	o := bindSimFlags(fs)
	if err := fs.Parse([]string{"--profile", "sim-gpt-4.1", "--itl", "3ms", "--cut-at", "4", "--fail-rate", "0.2"}); err != nil {
		t.Fatal(err)
	}
	opts, err := o.options(fs)
	if err != nil {
		t.Fatal(err)
	}
	gpt, _ := sim.LookupProfile("sim-gpt-4.1")
	p := opts.Profile
	if p.Name != "sim-gpt-4.1" || p.TTFT != gpt.TTFT || p.ITL != 3*time.Millisecond {
		t.Errorf("base profile: got %s ttft %v itl %v, want sim-gpt-4.1 with its ttft and itl 3ms", p.Name, p.TTFT, p.ITL)
	}
	if p.Faults.CutAt != 4 || p.Faults.CutRate != 0 || p.Faults.FailRate != 0.2 {
		t.Errorf("faults: got %+v, want cut at 4 always and fail rate 0.2", p.Faults)
	}
	for _, q := range opts.Profiles {
		if q.ITL != 3*time.Millisecond || q.Faults.CutAt != 4 {
			t.Errorf("profile %s: got itl %v cut-at %d, want the flags applied", q.Name, q.ITL, q.Faults.CutAt)
		}
	}
}

func TestSimServesAndShutsDown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errb strings.Builder
	go func() {
		done <- run(ctx, []string{"sim", "--addr", "127.0.0.1:0", "--tokens", "3", "--ttft", "1ms", "--itl", "1ms"},
			func(string) string { return "" }, pw, &errb)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %q)", err, errb.String())
	}
	go io.Copy(io.Discard, pr)
	_, rest, ok := strings.Cut(line, "http://")
	if !ok {
		t.Fatalf("first line: got %q, want the listen address", line)
	}
	addr := strings.Fields(rest)[0]
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"sim-fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") || strings.Count(string(body), `"content":"`) != 4 {
		t.Errorf("stream: got %q, want role + 3 content chunks and [DONE]", body)
	}
	// The other dialects on the same port.
	for _, c := range []struct{ path, body, last string }{
		{"/v1/messages", `{"model":"sim-fast","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{"/v1beta/models/sim-fast:streamGenerateContent?alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`,
			`"finishReason":"STOP"`},
	} {
		resp, err := (&http.Client{Transport: tr}).Post("http://"+addr+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), c.last) {
			t.Errorf("%s: got %d %q, want a complete stream", c.path, resp.StatusCode, body)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit: got %d, want 0 (stderr %q)", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sim did not shut down after its context ended")
	}
}
