package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/streamgate/streamgate/internal/config"
	"github.com/streamgate/streamgate/internal/usage"
)

// TestModelsRetrieve: the official client's models.retrieve finds a model
// of the key and gets a 404 model_not_found for one it may not use.
func TestModelsRetrieve(t *testing.T) {
	e := start(t, baseConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey("sk-narrow"), option.WithMaxRetries(0))
	m, err := client.Models.Get(ctx, "m-sim")
	if err != nil || m.ID != "m-sim" || m.Object != "model" || m.OwnedBy != "streamgate" {
		t.Fatalf("models.retrieve m-sim: got %+v, %v; want the model", m, err)
	}
	for _, id := range []string{"m-other", "nope"} { // not the key's; not configured
		_, err = client.Models.Get(ctx, id)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
			t.Errorf("models.retrieve %s: got %v, want 404 model_not_found", id, err)
		}
	}
	resp := do(t, "GET", e.url+"/v1/models/m-sim", "", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a key: got %d, want 401", resp.StatusCode)
	}
}

// TestEmbeddings: openai-go's embeddings call through the gateway, served by
// the second route after the first answers 503; one usage entry with the
// upstream's input tokens, priced per 1M input tokens.
func TestEmbeddings(t *testing.T) {
	var hits atomic.Int64
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/v1/embeddings" {
			t.Errorf("upstream got %s, want /v1/embeddings", r.URL.Path)
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error"}}`)
	}))
	defer unavailable.Close()
	cfg := baseConfig()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "bad", Kind: "openai", BaseURL: unavailable.URL + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "embed", Price: config.Price{Input: 20, Output: 999},
		Routes: []config.Route{{Provider: "bad", Model: "text-embedding-3-small"}, {Provider: "sim", Model: "text-embedding-3-small"}}})
	e := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(devKey), option.WithMaxRetries(0))
	res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:      "embed",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"one", "two"}},
		Dimensions: openai.Int(16),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 || len(res.Data[0].Embedding) != 16 || res.Usage.PromptTokens <= 0 || hits.Load() != 1 {
		t.Fatalf("got %d embeddings of %d dims, usage %+v, %d hits on the failing route; want 2 of 16, usage, 1",
			len(res.Data), len(res.Data[0].Embedding), res.Usage, hits.Load())
	}
	en := e.waitEntries(t, 1)[0]
	wantCost := float64(res.Usage.PromptTokens) * 20 / 1e6
	if en.Outcome != usage.OutcomeOK || en.Model != "embed" || en.Route != "sim/text-embedding-3-small" || en.Attempts != 2 ||
		en.Stream || en.InputTokens != int(res.Usage.PromptTokens) || en.OutputTokens != 0 || en.TokenSource != "usage" || en.CostUSD != wantCost {
		t.Errorf("got entry %+v; want ok via sim after 2 attempts, %d input tokens, 0 output, cost %g", en, res.Usage.PromptTokens, wantCost)
	}

	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{}}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" {
		t.Errorf("empty input: got %v, want 400 naming input", err)
	}
	e.waitEntries(t, 2)
}
