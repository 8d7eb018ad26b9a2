package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const otelBase = `
providers: [{name: sim, kind: sim}]
models: [{name: m, routes: [{provider: sim, model: sim-fast}]}]
`

func TestOTelParse(t *testing.T) {
	y := otelBase + `
otel:
  endpoint: http://127.0.0.1:4318
  service_name: gw-eu
  sample_ratio: 0.25
  headers:
    - {name: Authorization, value: "Bearer ${OTEL_TOKEN}"}
`
	cfg, err := Parse("o.yaml", []byte(y), envOf(map[string]string{"OTEL_TOKEN": "TOPSECRET-otel-token"}))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	o := cfg.OTel
	if o == nil || o.Endpoint != "http://127.0.0.1:4318" || o.ServiceName != "gw-eu" || o.Ratio() != 0.25 ||
		len(o.Headers) != 1 || o.Headers[0] != (Header{"Authorization", "Bearer TOPSECRET-otel-token"}) {
		t.Fatalf("got otel %#v, want the block as written with ${OTEL_TOKEN} expanded", o)
	}

	// The header's value is a secret: never printed.
	for what, s := range map[string]string{
		"String":      cfg.String(),
		"%v of OTel":  fmt.Sprintf("%v", *cfg.Redacted().OTel),
		"%#v headers": fmt.Sprintf("%#v", cfg.OTel.Headers),
	} {
		if strings.Contains(s, "TOPSECRET") {
			t.Errorf("%s shows the header value:\n%s", what, s)
		}
	}
	if got := cfg.OTel.Headers[0].Value; got != "Bearer TOPSECRET-otel-token" {
		t.Errorf("Redacted changed the original: got header value %q", got)
	}

	// A clone is deep: changing it leaves the original alone.
	c := cfg.Clone()
	*c.OTel.SampleRatio, c.OTel.Headers[0].Name = 1, "X-Other"
	if cfg.OTel.Ratio() != 0.25 || cfg.OTel.Headers[0].Name != "Authorization" {
		t.Errorf("changing a clone changed the original: %#v", cfg.OTel)
	}
}

func TestOTelOff(t *testing.T) {
	for _, tt := range []struct{ name, yaml string }{
		{"absent", otelBase},
		{"null", otelBase + "otel:\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("o.yaml", []byte(tt.yaml), nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if cfg.OTel != nil {
				t.Errorf("got otel %#v, want nil (off)", cfg.OTel)
			}
			if r := cfg.OTel.Ratio(); r != 1 {
				t.Errorf("Ratio of a nil block: got %v, want 1", r)
			}
		})
	}
}

func TestOTelValidate(t *testing.T) {
	ratio := func(r float64) *float64 { return &r }
	tests := []struct {
		name string
		otel OTel
		path string // "" when valid
		msg  string
	}{
		{"minimal", OTel{Endpoint: "http://127.0.0.1:4318"}, "", ""},
		{"https with path", OTel{Endpoint: "https://otlp.example.com/otlp/v1/traces", SampleRatio: ratio(0)}, "", ""},
		{"ratio 1", OTel{Endpoint: "http://c:4318", SampleRatio: ratio(1)}, "", ""},
		{"no endpoint", OTel{}, "otel.endpoint", "required"},
		{"grpc scheme", OTel{Endpoint: "grpc://c:4317"}, "otel.endpoint", "not an absolute http(s) URL"},
		{"credentials in the URL", OTel{Endpoint: "http://u:SECRET@c:4318"}, "otel.endpoint", "put them in otel.headers"},
		{"no host", OTel{Endpoint: "http:///v1/traces"}, "otel.endpoint", "not an absolute http(s) URL"},
		{"ratio above 1", OTel{Endpoint: "http://c:4318", SampleRatio: ratio(1.5)}, "otel.sample_ratio", "between 0 and 1, got 1.5"},
		{"ratio negative", OTel{Endpoint: "http://c:4318", SampleRatio: ratio(-0.1)}, "otel.sample_ratio", "between 0 and 1"},
		{"header without name", OTel{Endpoint: "http://c:4318", Headers: []Header{{Value: "x"}}}, "otel.headers[0].name", "required"},
		{"header name with space", OTel{Endpoint: "http://c:4318", Headers: []Header{{Name: "X Key", Value: "x"}}}, "otel.headers[0].name", "not an HTTP header name"},
		{"header value with newline", OTel{Endpoint: "http://c:4318", Headers: []Header{{Name: "A", Value: "SECRET\r\nX: y"}}}, "otel.headers[0].value", "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			o := tt.otel
			c.OTel = &o
			err := c.Validate()
			if tt.path == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Path != tt.path || !strings.Contains(fe.Msg, tt.msg) {
				t.Fatalf("got %v, want %s: …%s…", err, tt.path, tt.msg)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("message %q shows the header value", err)
			}
		})
	}
}
