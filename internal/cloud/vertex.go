package cloud

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/streamgate/streamgate/internal/cloudauth"
)

// VertexAnthropicVersion is the anthropic_version Vertex AI requires in
// the body of a Claude request.
const VertexAnthropicVersion = "vertex-2023-10-16"

// VertexHost is Vertex AI's endpoint for a region: the global endpoint
// has no region prefix (a "global-aiplatform" host does not exist).
func VertexHost(region string) string {
	if region == "global" || region == "" {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + region + "-aiplatform.googleapis.com"
}

// VertexPublisher is the base of a publisher's models on Vertex:
// {host}/v1/projects/{project}/locations/{region}/publishers/{publisher}.
// The gemini adapter, given it as its base URL with publisher "google",
// sends {base}/models/{model}:streamGenerateContent?alt=sse, which is
// Vertex's path.
func VertexPublisher(host, project, region, publisher string) string {
	if region == "" {
		region = "global"
	}
	return strings.TrimRight(host, "/") + "/v1/projects/" + url.PathEscape(project) + "/locations/" + url.PathEscape(region) + "/publishers/" + publisher
}

// Bearer is a RoundTripper that sets each request's Authorization to a
// token from Tokens, and removes the API-key headers the dialect adapters
// would send. Gemini on Vertex is the gemini adapter over it.
type Bearer struct {
	Base   http.RoundTripper
	Tokens *cloudauth.TokenSource
}

// RoundTrip implements http.RoundTripper.
func (b *Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, err := b.Tokens.Token(r.Context())
	if err != nil {
		return nil, &tokenError{err}
	}
	out := r.Clone(r.Context())
	out.Header.Del("X-Goog-Api-Key")
	out.Header.Del("X-Api-Key")
	out.Header.Set("Authorization", "Bearer "+tok)
	resp, err := b.Base.RoundTrip(out)
	if err == nil && resp.StatusCode/100 != 2 {
		googleError(resp)
	}
	return resp, err
}

// tokenError is a failed token grant: no request left, and another route
// may serve (the gateway treats it as a transport failure).
type tokenError struct{ err error }

func (e *tokenError) Error() string { return "cloud credentials: " + e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// VertexAnthropic is the RoundTripper that carries the anthropic adapter's
// Messages requests to Claude on Vertex AI: POST
// {publisher}/models/{model}:streamRawPredict (:rawPredict unstreamed), the
// body without "model" (it is in the URL) and with Vertex's
// anthropic_version, "stream" kept; a bearer token from Tokens.
type VertexAnthropic struct {
	Base http.RoundTripper
	// Publisher is VertexPublisher(host, project, region, "anthropic").
	Publisher string
	Tokens    *cloudauth.TokenSource
}

// RoundTrip implements http.RoundTripper.
func (v *VertexAnthropic) RoundTrip(r *http.Request) (*http.Response, error) {
	out, _, _, err := moveClaude(r, map[string]json.RawMessage{
		"model":             nil,
		"anthropic_version": json.RawMessage(`"` + VertexAnthropicVersion + `"`),
	}, func(model string, stream bool) string {
		if stream {
			return v.Publisher + "/models/" + cloudauth.PathEscape(model) + ":streamRawPredict"
		}
		return v.Publisher + "/models/" + cloudauth.PathEscape(model) + ":rawPredict"
	})
	if err != nil {
		return nil, fmt.Errorf("vertex: %w", err)
	}
	out.Header.Del("Anthropic-Version") // the body carries Vertex's
	return (&Bearer{Base: v.Base, Tokens: v.Tokens}).RoundTrip(out)
}

// googleError rewrites a Google API error ({"error":{"code","message",
// "status"}}) into Anthropic's error shape when the answer is not already
// in it, keeping the status: the adapters read their own dialect's errors
// and Google's front end answers auth and quota failures in its own.
func googleError(resp *http.Response) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	var g struct {
		Type  string `json:"type"`
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &g) == nil && g.Type == "" && g.Error.Status != "" {
		typ := awsErrorType("", resp.StatusCode)
		switch g.Error.Status {
		case "UNAUTHENTICATED":
			typ = "authentication_error"
		case "PERMISSION_DENIED":
			typ = "permission_error"
		case "NOT_FOUND":
			typ = "not_found_error"
		case "RESOURCE_EXHAUSTED":
			typ = "rate_limit_error"
		case "UNAVAILABLE":
			typ = "overloaded_error"
		}
		// Both shapes at once: the gemini adapter reads error.message and
		// error.status, the anthropic adapter error.type and error.message.
		nb, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{
			"type": typ, "message": g.Error.Message, "status": g.Error.Status, "code": resp.StatusCode,
		}})
		b = nb
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
}
