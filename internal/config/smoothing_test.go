package config

import (
	"strings"
	"testing"
	"time"
)

func TestSmoothing(t *testing.T) {
	base := `
providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: sim-fast}]%s}]
`
	tests := []struct {
		name    string
		block   string
		want    time.Duration // 0: off
		wantErr string
	}{
		{"absent", "", 0, ""},
		{"null", ", smoothing: null", 0, ""},
		{"50ms", ", smoothing: {max_delay: 50ms}", 50 * time.Millisecond, ""},
		{"the limit", ", smoothing: {max_delay: 1s}", time.Second, ""},
		{"missing max_delay", ", smoothing: {}", 0, "models[0].smoothing.max_delay: must be a duration above 0s and at most 1s, got 0s"},
		{"zero", ", smoothing: {max_delay: 0s}", 0, "models[0].smoothing.max_delay: must be a duration above 0s and at most 1s, got 0s"},
		{"over the limit", ", smoothing: {max_delay: 2s}", 0, "models[0].smoothing.max_delay: must be a duration above 0s and at most 1s, got 2s"},
		{"negative", ", smoothing: {max_delay: -5ms}", 0, "got -5ms"},
		{"no unit", ", smoothing: {max_delay: 50}", 0, "models[0].smoothing.max_delay"},
		{"unknown field", ", smoothing: {max_delay: 50ms, min_delay: 5ms}", 0, "min_delay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("s.yaml", []byte(strings.Replace(base, "%s", tt.block, 1)), envOf(nil))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			s := cfg.Models[0].Smoothing
			var got time.Duration
			if s != nil {
				got = s.MaxDelay.D()
			}
			if got != tt.want {
				t.Errorf("got max_delay %v, want %v", got, tt.want)
			}
			if s != nil {
				c := cfg.Clone()
				c.Models[0].Smoothing.MaxDelay = 0
				if cfg.Models[0].Smoothing.MaxDelay.D() != tt.want {
					t.Error("changing a clone's smoothing changed the original")
				}
			}
		})
	}
}
