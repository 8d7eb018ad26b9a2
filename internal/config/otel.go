package config

import (
	"fmt"
	"math"
	"net/url"
	"strings"
)

// DefaultServiceName is the service.name of the traces when otel.service_name
// is empty.
const DefaultServiceName = "streamgate"

// OTel is the `otel:` block: OpenTelemetry traces of every request, sent
// over OTLP/HTTP (protobuf) to Endpoint. A nil OTel (the block absent)
// turns tracing off: no SDK is built and the request path makes no span.
type OTel struct {
	// Endpoint is the collector's OTLP/HTTP base URL, e.g.
	// http://127.0.0.1:4318; spans are posted to its /v1/traces. A URL
	// with a path other than "/" is used as it is (the full traces URL).
	// Required.
	Endpoint string `yaml:"endpoint"`
	// ServiceName is the service.name resource attribute; empty means
	// DefaultServiceName.
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of requests traced, 0 to 1, decided from
	// the trace id; a request whose caller sent a W3C traceparent follows
	// the caller's sampled flag instead. Nil means 1 (every request).
	SampleRatio *float64 `yaml:"sample_ratio"`
	// Headers are sent with every export (a collector's credentials, hence
	// shown redacted). Nil means none.
	Headers []Header `yaml:"headers"`
}

// Header is one HTTP header; Value may be a secret.
type Header struct {
	Name  string `yaml:"name"`
	Value string `yaml:"value"`
}

// String shows h with its value redacted.
func (h Header) String() string { return h.Name + ": " + Redact(h.Value) }

// GoString is String, so %#v does not print the value either.
func (h Header) GoString() string { return h.String() }

// Ratio is SampleRatio, 1 when unset. It is 1 for a nil o too.
func (o *OTel) Ratio() float64 {
	if o == nil || o.SampleRatio == nil {
		return 1
	}
	return *o.SampleRatio
}

// clone is a deep copy of o; nil stays nil.
func (o *OTel) clone() *OTel {
	if o == nil {
		return nil
	}
	out := *o
	if o.SampleRatio != nil {
		r := *o.SampleRatio
		out.SampleRatio = &r
	}
	out.Headers = append([]Header(nil), o.Headers...)
	return &out
}

// redact hides o's secrets in place: header values and a password in the
// endpoint.
func (o *OTel) redact() {
	if o == nil {
		return
	}
	if o.Endpoint != "" {
		o.Endpoint = redactURL(o.Endpoint)
	}
	for i := range o.Headers {
		o.Headers[i].Value = Redact(o.Headers[i].Value)
	}
}

// otel checks the otel: block: an absolute http(s) endpoint without
// credentials in it, a sample
// ratio in [0, 1], header names that are HTTP tokens and values without
// line breaks. A nil block is valid (tracing off).
func (v *problems) otel(o *OTel) {
	if o == nil {
		return
	}
	if o.Endpoint == "" {
		v.add("otel.endpoint", "required (the collector's OTLP/HTTP URL, e.g. http://127.0.0.1:4318)")
	} else if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("otel.endpoint", "%s is not an absolute http(s) URL (e.g. http://127.0.0.1:4318)", redactURL(o.Endpoint))
	} else if u.User != nil {
		// The exporter would drop them silently.
		v.add("otel.endpoint", "%s holds credentials; put them in otel.headers (e.g. Authorization)", redactURL(o.Endpoint))
	}
	if r := o.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		v.add("otel.sample_ratio", "must be between 0 and 1, got %v", *r)
	}
	for i, h := range o.Headers {
		path := fmt.Sprintf("otel.headers[%d]", i)
		if h.Name == "" {
			v.add(path+".name", "required")
		} else if !isToken(h.Name) {
			v.add(path+".name", "%q is not an HTTP header name", h.Name)
		}
		// Not echoed: the value may be a secret.
		if strings.ContainsAny(h.Value, "\r\n\x00") {
			v.add(path+".value", "must not contain a line break or NUL")
		}
	}
}

// isToken reports whether s is an RFC 9110 token, as a header name must be.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}
