package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
)

// TestResponsesFaultMatrix: every fault of the simulator (503 and 429
// before the stream, a stall mid-stream past the idle timeout, a cut, an
// error event, a malformed line) × streamed and not × an OpenAI-, an
// Anthropic- and a Gemini-dialect upstream, through /v1/responses with
// openai-go: a stream is either refused before its first event (an
// OpenAI error) or has sequence numbers 0, 1, 2, … and exactly one
// terminal event, last, with a whole response (its output and usage); a
// non-stream answer is a response object of a terminal status or an
// OpenAI error; and every request ends as exactly one usage record.
func TestResponsesFaultMatrix(t *testing.T) {
	cfg, so := dialectConfig()
	cfg.Timeouts.Idle = config.Duration(300 * time.Millisecond)
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1, Sim: so})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	faults := []struct {
		name   string
		header []string
	}{
		{"503", []string{"X-Sim-Fail-Status", "503"}},
		{"429", []string{"X-Sim-Fail-Status", "429"}},
		{"stall", []string{"X-Sim-Stall-At", "3", "X-Sim-Stall-For", "1s"}},
		{"cut", []string{"X-Sim-Cut-At", "3"}},
		{"error-event", []string{"X-Sim-Error-At", "3"}},
		{"malformed", []string{"X-Sim-Malformed-At", "3"}},
	}
	requests := 0
	for _, model := range []string{"m-openai", "m-anthropic", "m-gemini"} {
		for _, f := range faults {
			for _, stream := range []bool{true, false} {
				name := fmt.Sprintf("%s/%s/stream=%v", model, f.name, stream)
				var opts []option.RequestOption
				for i := 0; i+1 < len(f.header); i += 2 {
					opts = append(opts, option.WithHeader(f.header[i], f.header[i+1]))
				}
				client := responsesClient(e, opts...)
				params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
				requests++
				if stream {
					checkFaultStream(t, name, client.Responses.NewStreaming(ctx, params))
				} else {
					res, err := client.Responses.New(ctx, params)
					var apiErr *openai.Error
					switch {
					case err == nil:
						if res.Status != "completed" && res.Status != "incomplete" && res.Status != "failed" || res.Output == nil || res.Usage.TotalTokens <= 0 {
							t.Errorf("%s: got %s; want a response of a terminal status with its output and usage", name, res.RawJSON())
						}
					case errors.As(err, &apiErr):
						if apiErr.StatusCode < 400 || apiErr.Message == "" {
							t.Errorf("%s: got %v; want an OpenAI error", name, err)
						}
					default:
						t.Errorf("%s: got %v; want a response or an OpenAI error", name, err)
					}
				}
				e.waitEntries(t, requests) // exactly one more usage record
			}
		}
	}
}

// checkFaultStream reads a Responses stream that met a fault.
func checkFaultStream(t *testing.T, name string, stream interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}) {
	t.Helper()
	n, terminal := 0, ""
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(n) {
			t.Errorf("%s: event %d (%s): sequence_number %d", name, n, ev.Type, ev.SequenceNumber)
		}
		if terminal != "" {
			t.Errorf("%s: event %s after the terminal %s", name, ev.Type, terminal)
		}
		n++
		switch ev.Type {
		case "response.completed":
			final, terminal = ev.AsResponseCompleted().Response, ev.Type
		case "response.incomplete":
			final, terminal = ev.AsResponseIncomplete().Response, ev.Type
		case "response.failed":
			final, terminal = ev.AsResponseFailed().Response, ev.Type
		}
	}
	if err := stream.Err(); err != nil {
		var apiErr *openai.Error
		if n > 0 || !errors.As(err, &apiErr) || apiErr.StatusCode < 400 {
			t.Errorf("%s: stream error %v after %d events; want an OpenAI error before the first event, or none", name, err, n)
		}
		return
	}
	if terminal == "" {
		t.Errorf("%s: %d events and no terminal event", name, n)
		return
	}
	if final.Output == nil || final.Usage.TotalTokens <= 0 || final.ID == "" {
		t.Errorf("%s: %s carries %s; want the whole response with its usage", name, terminal, final.RawJSON())
	}
}
