package sim

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestEmbeddingsOfficialClient runs openai-go's embeddings call against the
// sim: the answer has OpenAI's shape, one unit vector per input, the same
// vector for the same text, usage counted, and the fail-status fault applies.
func TestEmbeddingsOfficialClient(t *testing.T) {
	_, ts := newTestServer(t, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("none"), option.WithMaxRetries(0))
	ctx := context.Background()
	res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:      "text-embedding-3-small",
		Input:      openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"hello world", "annyeong", "hello world"}},
		Dimensions: openai.Int(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 3 || res.Model != "text-embedding-3-small" || res.Usage.PromptTokens <= 0 || res.Usage.TotalTokens != res.Usage.PromptTokens {
		t.Fatalf("got %d embeddings, model %q, usage %+v; want 3, the model asked for, prompt tokens counted", len(res.Data), res.Model, res.Usage)
	}
	for i, d := range res.Data {
		var norm float64
		for _, f := range d.Embedding {
			norm += f * f
		}
		if d.Index != int64(i) || len(d.Embedding) != 64 || math.Abs(norm-1) > 1e-4 {
			t.Errorf("embedding %d: index %d, %d dims, norm² %.5f; want index %d, 64 dims, a unit vector", i, d.Index, len(d.Embedding), norm, i)
		}
	}
	if res.Data[0].Embedding[0] != res.Data[2].Embedding[0] || res.Data[0].Embedding[0] == res.Data[1].Embedding[0] {
		t.Errorf("same text gave different vectors, or different texts the same")
	}

	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")},
	}, option.WithHeader(HeaderFailStatus, "503"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Errorf("with %s: 503: got %v, want a 503", HeaderFailStatus, err)
	}
	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{}},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" {
		t.Errorf("empty input: got %v, want 400 naming input", err)
	}
}
