package deploy

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamgate/streamgate/internal/config"
)

// TestHelmChart checks the chart without helm (helm lint and helm template
// are the full check): its values' config loads with the Secret's
// variables set, the pods' termination grace is above the drain, the
// probes ask /healthz and /readyz, and a PodDisruptionBudget exists.
func TestHelmChart(t *testing.T) {
	var values struct {
		ReplicaCount int    `yaml:"replicaCount"`
		DrainSeconds int    `yaml:"drainSeconds"`
		DrainMargin  int    `yaml:"drainMargin"`
		Config       string `yaml:"config"`
		Secret       struct {
			Name           string `yaml:"name"`
			DatabaseURLKey string `yaml:"databaseURLKey"`
			RedisURLKey    string `yaml:"redisURLKey"`
		} `yaml:"secret"`
	}
	if err := yaml.Unmarshal(readFile(t, "helm/streamgate/values.yaml"), &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	if values.ReplicaCount != wantReplicas {
		t.Errorf("replicaCount: got %d, want %d", values.ReplicaCount, wantReplicas)
	}
	env := map[string]string{
		values.Secret.DatabaseURLKey: "postgres://u:p@postgres:5432/streamgate?sslmode=disable",
		values.Secret.RedisURLKey:    "redis://redis:6379/0",
		"STREAMGATE_ADMIN_KEY":       "sk-admin",
	}
	cfg, err := config.Parse("values.yaml:config", []byte(values.Config), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the chart's config does not load: %v", err)
	}
	if !strings.HasPrefix(cfg.Database, "postgres://") || cfg.Redis == "" {
		t.Errorf("config: got database %q redis %q, want both from the Secret", cfg.Database, cfg.Redis)
	}
	grace := time.Duration(values.DrainSeconds+values.DrainMargin) * time.Second
	if values.DrainSeconds*int(time.Second) < int(drainGrace) || grace <= time.Duration(values.DrainSeconds)*time.Second {
		t.Errorf("drainSeconds %d, margin %d: want a drain of at least %v and a termination grace above it", values.DrainSeconds, values.DrainMargin, drainGrace)
	}
	dep := string(readFile(t, "helm/streamgate/templates/deployment.yaml"))
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`terminationGracePeriodSeconds: \{\{ add \.Values\.drainSeconds \.Values\.drainMargin \}\}`),
		regexp.MustCompile(`args: \["--grace", "\{\{ \.Values\.drainSeconds \}\}s"\]`),
		regexp.MustCompile(`livenessProbe:\s+httpGet: \{path: /healthz`),
		regexp.MustCompile(`readinessProbe:\s+httpGet: \{path: /readyz`),
		regexp.MustCompile(`secretKeyRef: \{name: \{\{ \.Values\.secret\.name \| quote \}\}, key: \{\{ \.Values\.secret\.databaseURLKey`),
		regexp.MustCompile(`secretKeyRef: \{name: \{\{ \.Values\.secret\.name \| quote \}\}, key: \{\{ \.Values\.secret\.redisURLKey`),
		regexp.MustCompile(`mountPath: /etc/streamgate\b`),
	} {
		if !want.MatchString(dep) {
			t.Errorf("templates/deployment.yaml: no match for %s", want)
		}
	}
	if got := entrypointConfig(t); got != "/etc/streamgate/streamgate.yaml" {
		t.Errorf("the image reads %s, the chart mounts /etc/streamgate/streamgate.yaml", got)
	}
	if pdb := string(readFile(t, "helm/streamgate/templates/pdb.yaml")); !strings.Contains(pdb, "kind: PodDisruptionBudget") {
		t.Error("templates/pdb.yaml: no PodDisruptionBudget")
	}
}

// TestGoreleaserLdflags: each -X of .goreleaser.yaml and the Dockerfile
// names a variable the version command or the metrics read.
func TestGoreleaserLdflags(t *testing.T) {
	want := map[string]string{
		"main.version": "../cmd/streamgate/root.go", "main.commit": "../cmd/streamgate/root.go", "main.date": "../cmd/streamgate/root.go",
		"github.com/streamgate/streamgate/internal/metrics.version": "../internal/metrics/buildinfo.go",
	}
	x := regexp.MustCompile(`-X ([\w./-]+)\.(\w+)=`)
	for _, f := range []string{"../.goreleaser.yaml", "Dockerfile"} {
		ms := x.FindAllStringSubmatch(string(readFile(t, f)), -1)
		if len(ms) == 0 {
			t.Errorf("%s: no -X ldflags", f)
		}
		for _, m := range ms {
			src, ok := want[m[1]+"."+m[2]]
			if !ok {
				t.Errorf("%s: -X %s.%s is not a variable the binary reads", f, m[1], m[2])
				continue
			}
			if !regexp.MustCompile(`(?m)^\s*(var\s+)?` + m[2] + `\s+=\s+""|var ` + m[2] + ` string`).Match(readFile(t, src)) {
				t.Errorf("%s: -X %s.%s: %s declares no string variable %s", f, m[1], m[2], src, m[2])
			}
		}
	}
}
