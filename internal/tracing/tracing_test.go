package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/streamgate/streamgate/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collector is an OTLP/HTTP receiver: it keeps each export request it got.
type collector struct {
	mu   sync.Mutex
	reqs []export
}

type export struct {
	path, auth, contentType string
	body                    *coltracepb.ExportTraceServiceRequest
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, export{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), &msg})
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

// New's provider sends the spans it batched to the endpoint's /v1/traces
// when shut down, as protobuf, with the configured headers and the
// service name in the resource.
func TestExportOverOTLPHTTP(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	o := &config.OTel{Endpoint: srv.URL, ServiceName: "gw-test",
		Headers: []config.Header{{Name: "Authorization", Value: "Bearer collector-token"}}}
	p, err := New(t.Context(), o, "v9", nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, span := p.Tracer().Start(t.Context(), "chat m")
	span.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.reqs) != 1 {
		t.Fatalf("got %d export requests, want 1", len(col.reqs))
	}
	ex := col.reqs[0]
	if ex.path != TracesPath || ex.auth != "Bearer collector-token" || ex.contentType != "application/x-protobuf" {
		t.Errorf("got path %q, Authorization %q, Content-Type %q; want %s, the configured header, protobuf", ex.path, ex.auth, ex.contentType, TracesPath)
	}
	rs := ex.body.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
		t.Fatalf("got %v, want one span", ex.body)
	}
	attrs := map[string]string{}
	for _, kv := range rs[0].GetResource().GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	if attrs["service.name"] != "gw-test" || attrs["service.version"] != "v9" {
		t.Errorf("got resource %v, want service.name gw-test, service.version v9", attrs)
	}
	ss := rs[0].GetScopeSpans()[0]
	if ss.GetScope().GetName() != Scope || ss.GetSpans()[0].GetName() != "chat m" {
		t.Errorf("got scope %q span %q, want %q and \"chat m\"", ss.GetScope().GetName(), ss.GetSpans()[0].GetName(), Scope)
	}
}

// A sample ratio of 0 records no span of a request without a sampled
// parent: the collector hears nothing.
func TestSampleRatioZero(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	zero := 0.0
	p, err := New(t.Context(), &config.OTel{Endpoint: srv.URL, SampleRatio: &zero}, "dev", nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, span := p.Tracer().Start(t.Context(), "chat m")
	if span.IsRecording() {
		t.Error("got a recording span, want none at sample_ratio 0")
	}
	span.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if len(col.reqs) != 0 {
		t.Errorf("got %d export requests, want 0", len(col.reqs))
	}
}

func TestTracesURL(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"base URL", "http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"},
		{"root path", "http://c:4318/", "http://c:4318/v1/traces"},
		{"own path kept", "https://otlp.example.com/otlp/v1/traces", "https://otlp.example.com/otlp/v1/traces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tracesURL(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := tracesURL("grpc://c:4317"); err == nil {
		t.Error("grpc://: got no error, want one")
	}
}

// A collector that is down fails every export: one WARN line a minute
// says so, with the count of the errors left out.
func TestErrorLogOncePerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		e := &errorLog{log: slog.New(slog.NewTextHandler(&buf, nil))}
		fail := errors.New("connection refused")
		e.Handle(fail)
		e.Handle(fail)
		e.Handle(fail)
		if got := strings.Count(buf.String(), "trace export failed"); got != 1 {
			t.Fatalf("got %d lines within the minute, want 1:\n%s", got, buf.String())
		}
		time.Sleep(errorEvery)
		e.Handle(fail)
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[1], "errors_not_logged=2") || !strings.Contains(lines[1], "connection refused") {
			t.Errorf("got %q, want a second line a minute later counting 2 errors not logged", lines)
		}
	})
}

// New refuses a nil block: tracing off is the caller's choice, not New's.
func TestNewNil(t *testing.T) {
	if _, err := New(context.Background(), nil, "dev", nil); err == nil {
		t.Error("got no error, want one")
	}
}
