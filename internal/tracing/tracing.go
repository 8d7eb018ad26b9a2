// Package tracing builds the OpenTelemetry tracer of the config's otel:
// block: an SDK tracer provider whose batch processor exports spans over
// OTLP/HTTP (protobuf) from a goroutine of its own, so a slow or absent
// collector never holds up a request. The gateway makes the spans; this
// package only wires the SDK and flushes it at shutdown.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/streamgate/streamgate/internal/config"
)

// Scope is the instrumentation scope name of the gateway's spans.
const Scope = "github.com/streamgate/streamgate/internal/gateway"

// TracesPath is appended to an endpoint given without a path, as the OTLP
// specification asks of a base URL.
const TracesPath = "/v1/traces"

// ExportTimeout bounds one export request to the collector.
const ExportTimeout = 10 * time.Second

// Provider is a running tracer provider. Shut it down once the gateway
// served its last request, so the spans still queued are sent.
type Provider struct {
	tp *sdktrace.TracerProvider
	tr *http.Transport // the exporter's own: its connections close at Shutdown
}

// New builds the tracer provider of o, which must be non-nil and valid
// (config.Validate): spans are sampled by o's ratio (a caller's sampled
// flag wins, parent-based), batched, and posted to the endpoint with o's
// headers, each export within ExportTimeout (retried with backoff for up
// to a minute). The block alone decides endpoint, headers and timeout: the
// exporter's OTEL_EXPORTER_OTLP_* variables for them are not read. An
// https endpoint is verified against the system's roots. version is the
// service.version. New also makes logger the SDK's process-wide error
// handler (the SDK reports failed exports only there), with at most one
// line per errorEvery. Nothing is sent before the first span ends.
func New(ctx context.Context, o *config.OTel, version string, logger *slog.Logger) (*Provider, error) {
	if o == nil {
		return nil, errors.New("tracing: no otel config")
	}
	endpoint, err := tracesURL(o.Endpoint)
	if err != nil {
		return nil, err
	}
	headers := make(map[string]string, len(o.Headers))
	for _, h := range o.Headers {
		headers[h.Name] = h.Value
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	exp, err := otlptracehttp.New(ctx,
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithHeaders(headers), // replaces OTEL_EXPORTER_OTLP_HEADERS
		otlptracehttp.WithHTTPClient(&http.Client{Transport: tr, Timeout: ExportTimeout}),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	name := o.ServiceName
	if name == "" {
		name = config.DefaultServiceName
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(semconv.ServiceName(name), semconv.ServiceVersion(version)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	if logger != nil {
		otel.SetErrorHandler(&errorLog{log: logger})
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.Ratio()))),
	)
	return &Provider{tp: tp, tr: tr}, nil
}

// ShutdownTimeout bounds the flush of the spans still queued at shutdown.
const ShutdownTimeout = 5 * time.Second

// Start is New for the gateway's start-up: with a nil o (tracing off) it
// returns a nil tracer and a stop that does nothing, else the provider's
// tracer and a stop that flushes it (within ShutdownTimeout, a failure
// logged at WARN). It logs at INFO where the spans go.
func Start(ctx context.Context, o *config.OTel, version string, logger *slog.Logger) (trace.Tracer, func(), error) {
	if o == nil {
		return nil, func() {}, nil
	}
	p, err := New(ctx, o, version, logger)
	if err != nil {
		return nil, nil, err
	}
	endpoint, _ := tracesURL(o.Endpoint)
	logger.Info("tracing on", slog.String("endpoint", endpoint), slog.Float64("sample_ratio", o.Ratio()))
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			logger.Warn("trace flush failed", slog.String("error", err.Error()))
		}
	}
	return p.Tracer(), stop, nil
}

// Tracer is the gateway's tracer.
func (p *Provider) Tracer() trace.Tracer { return p.tp.Tracer(Scope) }

// Shutdown exports the spans still queued and stops the exporter, within
// ctx. Spans that end afterwards are dropped.
func (p *Provider) Shutdown(ctx context.Context) error {
	err := p.tp.Shutdown(ctx)
	p.tr.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("tracing: flush spans: %w", err)
	}
	return nil
}

// tracesURL is the URL spans are posted to: endpoint, with TracesPath when
// it has no path of its own.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("tracing: otel.endpoint is not an absolute http(s) URL")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = TracesPath
	}
	u.RawQuery, u.Fragment = "", "" // the exporter sends neither
	return u.String(), nil
}

// errorEvery bounds how often the SDK's errors are logged: a collector that
// is down fails every export, and one line says it.
const errorEvery = time.Minute

// errorLog logs the SDK's errors (failed exports, spans dropped) at WARN,
// at most once per errorEvery, with the count of those left out.
type errorLog struct {
	log    *slog.Logger
	mu     sync.Mutex
	last   time.Time
	missed int
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < errorEvery {
		e.missed++
		e.mu.Unlock()
		return
	}
	missed := e.missed
	e.last, e.missed = now, 0
	e.mu.Unlock()
	e.log.Warn("trace export failed", slog.String("error", err.Error()), slog.Int("errors_not_logged", missed))
}
