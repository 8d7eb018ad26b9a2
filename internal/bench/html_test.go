package bench

import (
	"context"
	"strings"
	"testing"
)

func TestWriteHTMLSelfContained(t *testing.T) {
	url := newUpstream(t, &upstream{})
	res, err := RunAll(context.Background(), []Config{
		{BaseURL: url, Model: "a", Requests: 6, Concurrency: 2, MaxTokens: 4, KeepRequests: true, Label: "<x>"},
		{BaseURL: url, Model: "b", Requests: 6, Rate: 300, MaxTokens: 4, KeepRequests: true},
	}, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteHTML(&b, res); err != nil {
		t.Fatal(err)
	}
	h := b.String()
	if got := strings.Count(h, "<svg"); got != 4 {
		t.Errorf("plots: got %d svg elements, want 4", got)
	}
	for _, bad := range []string{"<script", "<link", "src=", "<x>"} {
		if strings.Contains(h, bad) {
			t.Errorf("report contains %q, want a self-contained, escaped page", bad)
		}
	}
	for _, want := range []string{"TTFT CDF", "ITL histogram", "Max gap", "TTFT over the run", "interrupted", "&lt;x&gt; a", "<polyline", "<circle"} {
		if !strings.Contains(h, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Count(h, "http://") != strings.Count(h, `xmlns="http://www.w3.org/2000/svg"`)+strings.Count(h, url) {
		t.Error("report refers to a network address other than the svg namespace and the benchmarked URL")
	}
}
