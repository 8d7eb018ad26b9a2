package demo

import (
	"testing"

	"github.com/streamgate/streamgate/internal/config"
)

// The rendered gateway config must load and validate like a user's file,
// keep every priced model of the embedded default, and route table 3's
// flaky model to a steady second route.
func TestGatewayConfigLoads(t *testing.T) {
	d, _, err := config.Default(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	data := gatewayConfig(d, "http://127.0.0.1:9", t.TempDir())
	cfg, err := config.Parse("gateway.yaml", data, func(k string) string {
		if k == "STREAMGATE_DEMO_KEY" {
			return "sg-demo-0123456789abcdef"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("rendered config does not load: %v\n%s", err, data)
	}
	for _, m := range costModels {
		want, _ := d.Price(m)
		got, ok := cfg.Price(m)
		if !ok || got != want {
			t.Errorf("price of %s: got %+v (%v), want %+v", m, got, ok, want)
		}
	}
	flaky, ok := cfg.Model("sim-flaky")
	if !ok || len(flaky.Routes) != 2 || flaky.Routes[1].Model != steadyProfile {
		t.Fatalf("sim-flaky routes: got %+v, want sim-flaky then %s", flaky, steadyProfile)
	}
	if p, _ := cfg.Provider("sim"); p == nil || p.Kind != "openai" || p.BaseURL != "http://127.0.0.1:9/v1" {
		t.Errorf("provider sim: got %+v, want kind openai at the simulator", p)
	}
}

func TestChildEnvDropsGCSettings(t *testing.T) {
	got := childEnv([]string{"PATH=/bin", "GOGC=50", "GOMEMLIMIT=2GiB"}, []string{"GOGC=off"})
	want := []string{"PATH=/bin", "GOGC=off"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %q, want %q", got, want)
	}
}
