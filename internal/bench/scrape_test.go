package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

// Server GC figures come only from series that cover the run's window (a
// histogram's or a counter's growth between the scrapes), never from a
// summary quantile, which covers a recent window of its own: a figure that
// cannot be measured is null in the JSON.
func TestServerStatsOnlyTheRunWindow(t *testing.T) {
	hist := func(fast, slow float64) map[string]float64 {
		return map[string]float64{
			`go_gc_pauses_seconds_bucket{le="0.0001"}`: fast,
			`go_gc_pauses_seconds_bucket{le="0.001"}`:  fast + slow,
			`go_gc_pauses_seconds_bucket{le="+Inf"}`:   fast + slow,
		}
	}
	with := func(m map[string]float64, kv ...any) map[string]float64 {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(float64)
		}
		return m
	}
	tests := []struct {
		name          string
		before, after map[string]float64
		want          string
	}{
		{"summary only",
			map[string]float64{`go_gc_duration_seconds{quantile="1"}`: 0.25, "go_gc_duration_seconds_count": 3},
			map[string]float64{`go_gc_duration_seconds{quantile="1"}`: 0.25, "go_gc_duration_seconds_count": 5},
			`"gc_pause_max_ms":null,"gc_cycles":2`},
		{"histogram grew", with(hist(4, 1), "go_gc_cycles_total_gc_cycles_total", 5.0), with(hist(6, 2), "go_gc_cycles_total_gc_cycles_total", 8.0),
			`"gc_pause_max_ms":1,"gc_cycles":3`},
		{"no pause in the window", hist(4, 1), hist(4, 1), `"gc_pause_max_ms":0,"gc_cycles":null`},
		{"histogram missing before the run", map[string]float64{}, hist(6, 2), `"gc_pause_max_ms":null,"gc_cycles":null`},
		{"cycle counter missing before the run", map[string]float64{}, map[string]float64{"go_gc_cycles_total_gc_cycles_total": 9},
			`"gc_pause_max_ms":null,"gc_cycles":null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(serverStats(tt.before, tt.after))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tt.want) {
				t.Errorf("got %s, want %s", b, tt.want)
			}
		})
	}
}
