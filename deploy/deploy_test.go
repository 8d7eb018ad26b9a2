// Package deploy holds the files that run streamgate as several replicas
// (Docker Compose, Kubernetes, the shared config) and the test that keeps
// them consistent with each other, with README.md and with the gateway's own
// config loader. It has no code of its own.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/streamgate/streamgate/internal/config"
)

const (
	gatewayService = "gateway"    // compose.yaml's gateway service
	lbService      = "lb"         // compose.yaml's nginx in front of the replicas
	promService    = "prometheus" // compose.yaml's Prometheus (profile monitoring)
	grafanaService = "grafana"    // compose.yaml's Grafana (profile monitoring)
	dashboardFile  = "grafana/streamgate.json"
	dsVariable     = "DS_PROMETHEUS" // the dashboard's data source variable
	gatewayName    = "streamgate"    // kubernetes.yaml's Deployment and container
	wantReplicas   = 3
	drainGrace     = 30 * time.Second // serve's --grace default
)

// composeFile is the part of compose.yaml the test reads.
type composeFile struct {
	Services map[string]struct {
		Deploy struct {
			Replicas *int `yaml:"replicas"`
		} `yaml:"deploy"`
		Environment     yaml.Node `yaml:"environment"` // a map or a list of NAME=value
		Volumes         []string  `yaml:"volumes"`
		StopGracePeriod string    `yaml:"stop_grace_period"`
		Entrypoint      yaml.Node `yaml:"entrypoint"`
		Command         yaml.Node `yaml:"command"`
		Profiles        []string  `yaml:"profiles"`
	} `yaml:"services"`
}

// k8sObject is the part of a Kubernetes manifest the test reads.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name  string `yaml:"name"`
			Items []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name string `yaml:"name"`
	} `yaml:"env"`
	EnvFrom      []any `yaml:"envFrom"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(readFile(t, "compose.yaml"), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if _, ok := c.Services[gatewayService]; !ok {
		t.Fatalf("compose.yaml: no service %q", gatewayService)
	}
	return c
}

// loadK8s returns the documents of kubernetes.yaml, which must all parse.
func loadK8s(t *testing.T) []k8sObject {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, "kubernetes.yaml")))
	var objs []k8sObject
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("kubernetes.yaml: document %d: %v", len(objs)+1, err)
		}
		objs = append(objs, o)
	}
	return objs
}

func k8sKind(t *testing.T, objs []k8sObject, kind, name string) k8sObject {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("kubernetes.yaml: no %s named %q", kind, name)
	return k8sObject{}
}

func k8sGateway(t *testing.T, objs []k8sObject) (k8sObject, container) {
	t.Helper()
	d := k8sKind(t, objs, "Deployment", gatewayName)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == gatewayName {
			return d, c
		}
	}
	t.Fatalf("kubernetes.yaml: Deployment %q has no container %q", gatewayName, gatewayName)
	return d, container{}
}

// entrypointConfig returns the --config path of the Dockerfile's ENTRYPOINT.
func entrypointConfig(t *testing.T) string {
	t.Helper()
	for line := range strings.Lines(string(readFile(t, "Dockerfile"))) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENTRYPOINT ")
		if !ok {
			continue
		}
		var argv []string
		if err := json.Unmarshal([]byte(rest), &argv); err != nil {
			t.Fatalf("Dockerfile: ENTRYPOINT is not in exec form (a JSON array), so SIGTERM would not reach streamgate: %v", err)
		}
		if len(argv) < 2 || argv[0] != "streamgate" || argv[1] != "serve" {
			t.Fatalf("Dockerfile: ENTRYPOINT %q, want streamgate serve --config ...", argv)
		}
		if i := slices.Index(argv, "--config"); i >= 0 && i+1 < len(argv) {
			return argv[i+1]
		}
		t.Fatalf("Dockerfile: ENTRYPOINT %q has no --config PATH", argv)
	}
	t.Fatal("Dockerfile: no ENTRYPOINT")
	return ""
}

var varRef = regexp.MustCompile(`\$?\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// refs returns the names of the ${VAR} references in text ($${ is a literal).
func refs(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range varRef.FindAllStringSubmatch(text, -1) {
		if !strings.HasPrefix(m[0], "$$") {
			out[m[1]] = true
		}
	}
	return out
}

// readmeVars returns the names in the first column of the table under
// README.md's "## Environment variables" heading.
func readmeVars(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	in := false
	for line := range strings.Lines(string(readFile(t, "README.md"))) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "## ") {
			in = line == "## Environment variables"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
		out[name] = true
	}
	if len(out) == 0 {
		t.Fatal("README.md: no table of variables under \"## Environment variables\"")
	}
	return out
}

func composeEnv(t *testing.T, n yaml.Node) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i < len(n.Content); i += 2 {
			out[n.Content[i].Value] = true
		}
	case yaml.SequenceNode:
		for _, e := range n.Content {
			name, _, _ := strings.Cut(e.Value, "=")
			out[name] = true
		}
	case 0:
	default:
		t.Fatalf("compose.yaml: %s.environment is neither a map nor a list", gatewayService)
	}
	return out
}

func sorted(set map[string]bool) []string { return slices.Sorted(maps.Keys(set)) }

// show formats an optional number for messages: "unset" when p is nil.
func show(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

func TestReplicas(t *testing.T) {
	if r := loadCompose(t).Services[gatewayService].Deploy.Replicas; r == nil || *r != wantReplicas {
		t.Errorf("compose.yaml: %s.deploy.replicas = %s, want %d", gatewayService, show(r), wantReplicas)
	}
	d, _ := k8sGateway(t, loadK8s(t))
	if r := d.Spec.Replicas; r == nil || *r != wantReplicas {
		t.Errorf("kubernetes.yaml: Deployment replicas = %s, want %d", show(r), wantReplicas)
	}
}

// TestEnvironment checks that the variables the config expands, the
// variables compose and Kubernetes give the gateway and the variables the
// README documents are one and the same set.
func TestEnvironment(t *testing.T) {
	documented := readmeVars(t)
	c := loadCompose(t)
	_, k8s := k8sGateway(t, loadK8s(t))
	if len(k8s.EnvFrom) > 0 {
		t.Errorf("kubernetes.yaml: the gateway uses envFrom, which hides the variables' names; list them under env")
	}
	k8sEnv := map[string]bool{}
	for _, e := range k8s.Env {
		k8sEnv[e.Name] = true
	}
	for _, tc := range []struct {
		name string
		set  map[string]bool
	}{
		{"streamgate.yaml ${VAR} references", refs(string(readFile(t, "streamgate.yaml")))},
		{"compose.yaml gateway environment", composeEnv(t, c.Services[gatewayService].Environment)},
		{"kubernetes.yaml gateway env", k8sEnv},
	} {
		if !maps.Equal(tc.set, documented) {
			t.Errorf("%s: got %q, want the README's %q", tc.name, sorted(tc.set), sorted(documented))
		}
	}
	// compose.yaml's own ${VAR} interpolation reads the host's environment.
	for name := range refs(string(readFile(t, "compose.yaml"))) {
		if !documented[name] {
			t.Errorf("compose.yaml interpolates ${%s}, which README.md's \"Environment variables\" does not name", name)
		}
	}
}

// TestConfigPath checks that both deployments put the config where the
// image's entrypoint reads it, and that they run that entrypoint.
func TestConfigPath(t *testing.T) {
	path := entrypointConfig(t)

	gw := loadCompose(t).Services[gatewayService]
	if gw.Entrypoint.Kind != 0 || gw.Command.Kind != 0 {
		t.Errorf("compose.yaml: %s overrides the image's entrypoint or command", gatewayService)
	}
	mounted := false
	for _, v := range gw.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == path {
			mounted = true
			if parts[0] != "./streamgate.yaml" {
				t.Errorf("compose.yaml: %s mounts %q at %s, want ./streamgate.yaml", gatewayService, parts[0], path)
			}
		}
	}
	if !mounted {
		t.Errorf("compose.yaml: %s mounts nothing at %s (volumes %q)", gatewayService, path, gw.Volumes)
	}

	objs := loadK8s(t)
	d, ctr := k8sGateway(t, objs)
	if len(ctr.Command) > 0 || len(ctr.Args) > 0 {
		t.Errorf("kubernetes.yaml: the gateway container overrides the image's entrypoint")
	}
	var files []string // the paths inside the container that hold a ConfigMap key
	for _, m := range ctr.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm := k8sKind(t, objs, "ConfigMap", v.ConfigMap.Name)
			if m.SubPath != "" {
				files = append(files, m.MountPath) // the key named by subPath, as a file
				continue
			}
			if len(v.ConfigMap.Items) == 0 {
				for key := range cm.Data {
					files = append(files, m.MountPath+"/"+key)
				}
			}
			for _, it := range v.ConfigMap.Items {
				files = append(files, m.MountPath+"/"+it.Path)
			}
		}
	}
	if !slices.Contains(files, path) {
		t.Errorf("kubernetes.yaml: the gateway container has no ConfigMap file at %s (it has %q)", path, files)
	}
}

// TestSameConfig checks that the ConfigMap carries deploy/streamgate.yaml.
func TestSameConfig(t *testing.T) {
	cm := k8sKind(t, loadK8s(t), "ConfigMap", gatewayName)
	got := strings.TrimSpace(cm.Data["streamgate.yaml"])
	want := strings.TrimSpace(string(readFile(t, "streamgate.yaml")))
	if got != want {
		t.Errorf("kubernetes.yaml: ConfigMap %s's streamgate.yaml differs from streamgate.yaml; copy it over (indented by 4)", gatewayName)
	}
}

// TestConfigLoads loads streamgate.yaml with the gateway's own loader, as
// `streamgate keys create --config` does, and as serve does with every
// required variable set and the optional one unset.
func TestConfigLoads(t *testing.T) {
	env := map[string]string{
		"POSTGRES_PASSWORD":    "pw",
		"STREAMGATE_ADMIN_KEY": "admin-secret",
		"STREAMGATE_DEV_KEY":   "sg-dev-secret",
	}
	cfg, err := config.LoadWithoutSecrets("streamgate.yaml", func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadWithoutSecrets: %v", err)
	}
	for _, tc := range []struct{ field, got, want string }{
		{"listen", cfg.Listen, "0.0.0.0:8080"},
		{"database", cfg.Database, "postgres://streamgate:pw@postgres:5432/streamgate?sslmode=disable"},
		{"redis", cfg.Redis, "redis://redis:6379/0"},
		{"admin_key", cfg.AdminKey, "admin-secret"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.field, tc.got, tc.want)
		}
	}
	if len(cfg.Models) == 0 {
		t.Error("no models")
	}
	if _, err := config.Load("streamgate.yaml", func(k string) string { return env[k] }); err != nil {
		t.Errorf("Load without OPENAI_API_KEY (documented as optional): %v", err)
	}
}

// TestShutdownGrace checks that the orchestrators wait longer than the
// gateway drains, and that Kubernetes probes the documented endpoints.
func TestShutdownGrace(t *testing.T) {
	gw := loadCompose(t).Services[gatewayService]
	if d, err := time.ParseDuration(gw.StopGracePeriod); err != nil || d <= drainGrace {
		t.Errorf("compose.yaml: %s.stop_grace_period = %q, want a duration above %v", gatewayService, gw.StopGracePeriod, drainGrace)
	}
	d, ctr := k8sGateway(t, loadK8s(t))
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drainGrace {
		t.Errorf("kubernetes.yaml: terminationGracePeriodSeconds = %s, want above %v", show(g), drainGrace)
	}
	for _, tc := range []struct {
		name string
		p    *probe
		want string
	}{{"readinessProbe", ctr.ReadinessProbe, "/readyz"}, {"livenessProbe", ctr.LivenessProbe, "/healthz"}} {
		if tc.p == nil || tc.p.HTTPGet == nil || tc.p.HTTPGet.Path != tc.want {
			t.Errorf("kubernetes.yaml: %s is not an httpGet of %s", tc.name, tc.want)
		}
	}
	if len(ctr.Resources.Requests) == 0 || ctr.Resources.Limits["memory"] == "" {
		t.Errorf("kubernetes.yaml: the gateway container needs resource requests and a memory limit")
	}
}

// TestLoadBalancer checks the nginx settings that SSE streams need.
func TestLoadBalancer(t *testing.T) {
	conf := string(readFile(t, "nginx.conf"))
	for _, want := range []string{"proxy_buffering off;", "proxy_http_version 1.1;", "proxy_read_timeout 3600s;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf: no %q", want)
		}
	}
}

// promConfig is the part of prometheus.yml the test reads.
type promConfig struct {
	Global struct {
		ScrapeInterval string `yaml:"scrape_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		DNSSDConfigs []struct {
			Names []string `yaml:"names"`
			Type  string   `yaml:"type"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
	} `yaml:"scrape_configs"`
}

// grafanaDatasources is the part of the provisioned data sources the test reads.
type grafanaDatasources struct {
	Datasources []struct {
		Type     string `yaml:"type"`
		URL      string `yaml:"url"`
		JSONData struct {
			TimeInterval string `yaml:"timeInterval"`
		} `yaml:"jsonData"`
	} `yaml:"datasources"`
}

// grafanaProviders is the part of the provisioned dashboard providers the test reads.
type grafanaProviders struct {
	Providers []struct {
		Type    string `yaml:"type"`
		Options struct {
			Path string `yaml:"path"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

func loadYAML(t *testing.T, name string, v any) {
	t.Helper()
	if err := yaml.Unmarshal(readFile(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// gatewayPort is the port the replicas listen on, from streamgate.yaml.
func gatewayPort(t *testing.T) int {
	t.Helper()
	env := map[string]string{"POSTGRES_PASSWORD": "pw", "STREAMGATE_ADMIN_KEY": "admin-secret", "STREAMGATE_DEV_KEY": "sg-dev-secret"}
	cfg, err := config.LoadWithoutSecrets("streamgate.yaml", func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("streamgate.yaml: %v", err)
	}
	_, port, err := net.SplitHostPort(cfg.Listen)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		t.Fatalf("streamgate.yaml: listen %q has no port", cfg.Listen)
	}
	return n
}

// TestPrometheusScrapesReplicas checks that prometheus.yml scrapes every
// gateway replica on the port they listen on, never the load balancer: each
// replica's /metrics describes that replica only.
func TestPrometheusScrapesReplicas(t *testing.T) {
	var pc promConfig
	loadYAML(t, "prometheus.yml", &pc)
	port := gatewayPort(t)
	jobs := 0
	for _, sc := range pc.ScrapeConfigs {
		if sc.JobName != "streamgate" {
			continue
		}
		jobs++
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("prometheus.yml: job streamgate scrapes %s, want /metrics", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				if host, _, _ := net.SplitHostPort(target); host == lbService || host == gatewayService {
					t.Errorf("prometheus.yml: static target %s reaches one replica at random (through %s or the service address); discover each replica", target, host)
				}
			}
		}
		found := false
		for _, d := range sc.DNSSDConfigs {
			if !slices.Contains(d.Names, gatewayService) {
				continue
			}
			found = true
			// Type A: one target per replica's address (SRV records are
			// not served by Docker's DNS).
			if d.Type != "A" || d.Port != port {
				t.Errorf("prometheus.yml: dns_sd_configs of %s: type %s port %d, want type A port %d (streamgate.yaml's listen)", gatewayService, d.Type, d.Port, port)
			}
		}
		if !found {
			t.Errorf("prometheus.yml: job streamgate does not discover the %q replicas through dns_sd_configs", gatewayService)
		}
	}
	if jobs != 1 {
		t.Errorf("prometheus.yml: got %d jobs named streamgate, want 1", jobs)
	}

	var ds grafanaDatasources
	loadYAML(t, "grafana/provisioning/datasources/prometheus.yaml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("grafana/provisioning/datasources/prometheus.yaml: want one prometheus data source, got %+v", ds.Datasources)
	}
	// $__rate_interval is four times the data source's timeInterval: equal
	// to the scrape interval, every rate spans at least four scrapes.
	if got, want := ds.Datasources[0].JSONData.TimeInterval, pc.Global.ScrapeInterval; got != want {
		t.Errorf("grafana data source timeInterval %q, want prometheus.yml's scrape_interval %q", got, want)
	}
	if url := ds.Datasources[0].URL; !strings.Contains(url, "//"+promService+":") {
		t.Errorf("grafana data source url %q does not name the %s service", url, promService)
	}
}

// mountsOf maps the container paths of a compose service's volumes to
// their host paths.
func mountsOf(volumes []string) map[string]string {
	out := map[string]string{}
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

// TestMonitoringProfile checks compose.yaml's Prometheus and Grafana: only
// under a profile (a plain `up` starts the gateway stack alone), and given
// the files of this folder where they read them.
func TestMonitoringProfile(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{promService, grafanaService} {
		svc, ok := c.Services[name]
		if !ok {
			t.Fatalf("compose.yaml: no service %q", name)
		}
		if len(svc.Profiles) == 0 {
			t.Errorf("compose.yaml: %s has no profile, so every `up` would start it", name)
		}
		for _, v := range svc.Volumes {
			host := strings.Split(v, ":")[0]
			if strings.HasPrefix(host, "./") {
				if _, err := os.Stat(host); err != nil {
					t.Errorf("compose.yaml: %s mounts %s: %v", name, host, err)
				}
			}
		}
	}
	if got := mountsOf(c.Services[promService].Volumes)["/etc/prometheus/prometheus.yml"]; got != "./prometheus.yml" {
		t.Errorf("compose.yaml: %s mounts %q at /etc/prometheus/prometheus.yml, want ./prometheus.yml", promService, got)
	}
	gm := mountsOf(c.Services[grafanaService].Volumes)
	if got := gm["/etc/grafana/provisioning"]; got != "./grafana/provisioning" {
		t.Errorf("compose.yaml: %s mounts %q at /etc/grafana/provisioning, want ./grafana/provisioning", grafanaService, got)
	}
	var pv grafanaProviders
	loadYAML(t, "grafana/provisioning/dashboards/streamgate.yaml", &pv)
	if len(pv.Providers) != 1 || pv.Providers[0].Type != "file" {
		t.Fatalf("grafana/provisioning/dashboards/streamgate.yaml: want one file provider, got %+v", pv.Providers)
	}
	want := pv.Providers[0].Options.Path + "/" + filepath.Base(dashboardFile)
	if got := gm[want]; got != "./"+dashboardFile {
		t.Errorf("compose.yaml: %s mounts %q at %s (the dashboard provider's path), want ./%s", grafanaService, got, want, dashboardFile)
	}
}

// dashPanel is the part of a Grafana panel the test reads.
type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		Datasource json.RawMessage `json:"datasource"`
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// TestGrafanaDashboard checks the dashboard's shape: every query on the
// data source variable (so it imports into any Grafana and provisions in
// compose), a model variable, unique ids, panels that do not overlap. That
// its queries name exported metrics and labels is checked against a live
// gateway in internal/gateway (TestMetricsExported).
func TestGrafanaDashboard(t *testing.T) {
	var dash struct {
		UID        string      `json:"uid"`
		Title      string      `json:"title"`
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Datasource json.RawMessage `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(readFile(t, dashboardFile), &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("%s: uid %q title %q, want both set (provisioning keys on the uid)", dashboardFile, dash.UID, dash.Title)
	}
	wantDS := `{"type":"prometheus","uid":"${` + dsVariable + `}"}`
	onVariable := func(raw json.RawMessage) bool {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			return false
		}
		b, _ := json.Marshal(v) // compact, keys sorted
		return string(b) == wantDS
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && !onVariable(v.Datasource) {
			t.Errorf("%s: variable %s: datasource %s, want %s", dashboardFile, v.Name, v.Datasource, wantDS)
		}
		if v.Name == dsVariable && string(v.Query) != `"prometheus"` {
			t.Errorf("%s: variable %s: query %s, want \"prometheus\"", dashboardFile, v.Name, v.Query)
		}
	}
	if vars[dsVariable] != "datasource" || vars["model"] != "query" {
		t.Errorf("%s: variables %v, want %s (datasource) and model (query)", dashboardFile, vars, dsVariable)
	}

	ids := map[int]string{}
	type rect struct {
		title      string
		x, y, w, h int
	}
	var placed []rect
	var walk func([]dashPanel)
	walk = func(panels []dashPanel) {
		for _, p := range panels {
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("%s: panel %q: id %d (also %q), want unique non-zero ids", dashboardFile, p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q: gridPos %+v outside the 24 columns", dashboardFile, p.Title, g)
			}
			for _, r := range placed {
				if g.X < r.x+r.w && r.x < g.X+g.W && g.Y < r.y+r.h && r.y < g.Y+g.H {
					t.Errorf("%s: panel %q overlaps %q", dashboardFile, p.Title, r.title)
				}
			}
			placed = append(placed, rect{p.Title, g.X, g.Y, g.W, g.H})
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if !onVariable(p.Datasource) {
				t.Errorf("%s: panel %q: datasource %s, want %s", dashboardFile, p.Title, p.Datasource, wantDS)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || !onVariable(tg.Datasource) {
					t.Errorf("%s: panel %q: target %q: want an expr, a refId and datasource %s", dashboardFile, p.Title, tg.RefID, wantDS)
				}
			}
		}
	}
	walk(dash.Panels)
}
