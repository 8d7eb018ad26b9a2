package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/gateway"
)

// counted puts a counting reverse proxy in front of the gateway: n is the
// number of requests that reached it.
func counted(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	rp := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL, n
}

// Refusals no retry can fix (a spent budget, an unknown key, a model the
// key may not use) carry x-should-retry: false and no Retry-After, so the
// official SDKs, with their default of 2 retries, fail after one request
// (issue 25: a budget's Retry-After of hours held the Node SDKs silent); a
// rate limit keeps a Retry-After the SDKs may honour.
func TestFinalRefusalsNotRetried(t *testing.T) {
	cfg := baseConfig()
	cfg.Keys = append(cfg.Keys,
		config.Key{Name: "spent", Key: "sk-spent", BudgetUSD: 0.002, BudgetPeriod: "day"},
		config.Key{Name: "slow", Key: "sk-slow", RPM: 1})
	e := startWith(t, gateway.Options{Config: cfg, KeepAlive: -1,
		Spent: func(_ context.Context, key string, _ time.Time) (float64, error) {
			if key == "spent" {
				return 0.0021337, nil
			}
			return 0, nil
		}})
	base, reached := counted(t, e.url)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	chat := func(key, model string) error {
		// The SDK's defaults: 2 retries.
		c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key))
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(4),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		return err
	}
	for _, tt := range []struct {
		name, key, model string
		status           int
		code, msg        string
	}{
		{"budget spent", "sk-spent", "m-sim", 429, "insufficient_quota", "budget of $0.002 per day spent ($0.00213 used)"},
		{"unknown key", "sk-nobody", "m-sim", 401, "invalid_api_key", ""},
		{"model not allowed", "sk-narrow", "m-other", 403, "model_not_allowed", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reached.Store(0)
			err := chat(tt.key, tt.model)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status || apiErr.Code != tt.code || !strings.Contains(apiErr.Message, tt.msg) {
				t.Fatalf("got %v, want %d %s naming %q", err, tt.status, tt.code, tt.msg)
			}
			if n := reached.Load(); n != 1 {
				t.Errorf("openai-go sent %d requests, want 1 (no retry)", n)
			}
			if h := apiErr.Response.Header; h.Get("X-Should-Retry") != "false" || h.Get("Retry-After") != "" {
				t.Errorf("headers x-should-retry %q, Retry-After %q; want false and none", h.Get("X-Should-Retry"), h.Get("Retry-After"))
			}
		})
	}

	t.Run("budget spent, anthropic-sdk-go stream", func(t *testing.T) {
		reached.Store(0)
		c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sk-spent"))
		st := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "m-sim", MaxTokens: 4,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		for st.Next() {
		}
		var apiErr *anthropic.Error
		if err := st.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || !strings.Contains(apiErr.Error(), "$0.002") {
			t.Fatalf("got %v, want 429 naming the $0.002 budget", err)
		}
		if n := reached.Load(); n != 1 {
			t.Errorf("anthropic-sdk-go sent %d requests, want 1 (no retry)", n)
		}
	})

	t.Run("rate limit keeps Retry-After", func(t *testing.T) {
		var last *http.Response
		for range 2 {
			last = do(t, "POST", e.url+"/v1/chat/completions", "sk-slow", chatBody("m-sim", false, ""))
			last.Body.Close()
		}
		ra, err := strconv.Atoi(last.Header.Get("Retry-After"))
		if last.StatusCode != 429 || err != nil || ra < 1 || ra > 60 || last.Header.Get("X-Should-Retry") != "" {
			t.Fatalf("2nd request at rpm 1: got %d, Retry-After %q, x-should-retry %q; want 429, 1 to 60 s, none",
				last.StatusCode, last.Header.Get("Retry-After"), last.Header.Get("X-Should-Retry"))
		}
	})
}
