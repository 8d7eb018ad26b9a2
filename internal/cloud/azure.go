package cloud

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/cloudauth"
)

// Azure is the RoundTripper that carries the openai adapter's requests
// ({resource}/chat/completions, /embeddings, /responses) to Azure OpenAI /
// Foundry: with APIVersion, the deployment paths
// {resource}/openai/deployments/{model}/…?api-version=; without, the v1
// path {resource}/openai/v1/… with the model in the body. The key goes in
// the api-key header (or an Entra ID token as a bearer). A streamed chat
// answer is normalised on the way: Azure's chunks with no choices (its
// prompt filter results) and its filter-only chunks after the finish are
// dropped, so strict clients see OpenAI's stream.
type Azure struct {
	Base       http.RoundTripper
	Resource   string // https://{resource}.openai.azure.com, no trailing slash
	APIVersion string // "" uses the v1 path
	APIKey     string
	Tokens     *cloudauth.TokenSource // Entra ID, used when APIKey is ""
}

// RoundTrip implements http.RoundTripper.
func (a *Azure) RoundTrip(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.URL.Path, strings.TrimRight(mustPath(a.Resource), "/"))
	out := r.Clone(r.Context())
	var target string
	if a.APIVersion == "" || r.Method != http.MethodPost {
		target = a.Resource + "/openai/v1" + op
	} else {
		body, err := readBody(r)
		if err != nil {
			return nil, err
		}
		var head struct {
			Model string `json:"model"`
		}
		if err := json.Unmarshal(body, &head); err != nil || head.Model == "" {
			return nil, fmt.Errorf("azure: the request body has no model: %v", err)
		}
		if op == "/responses" {
			// The Responses API has no deployment path: the model stays in
			// the body, the version in the query.
			target = a.Resource + "/openai" + op + "?api-version=" + url.QueryEscape(a.APIVersion)
		} else {
			target = a.Resource + "/openai/deployments/" + cloudauth.PathEscape(head.Model) + op + "?api-version=" + url.QueryEscape(a.APIVersion)
		}
		if op == "/responses" {
			// Azure's Responses API refuses stream_options.
			if body, err = api.SetMembers(body, map[string]json.RawMessage{"stream_options": nil}); err != nil {
				return nil, fmt.Errorf("azure: %w", err)
			}
		}
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	out.URL, out.Host = u, u.Host
	out.Header.Del("Authorization")
	if a.APIKey != "" {
		out.Header.Set("Api-Key", a.APIKey)
	} else if a.Tokens != nil {
		tok, err := a.Tokens.Token(r.Context())
		if err != nil {
			return nil, &tokenError{err}
		}
		out.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := a.Base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 && op == "/chat/completions" && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = newAzureFilter(resp.Body)
	}
	return resp, nil
}

func mustPath(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Path
}

// azureFilter drops the events of an Azure chat stream that OpenAI never
// sends: a chunk whose choices are empty and that carries no usage (the
// prompt filter results Azure sends first), and a choice-less or
// delta-less chunk after the finish that carries only content filter
// results. Every other line passes as it came.
type azureFilter struct {
	body     io.ReadCloser
	r        *bufio.Reader
	out      []byte
	off      int
	err      error
	finished bool
}

func newAzureFilter(body io.ReadCloser) *azureFilter {
	return &azureFilter{body: body, r: bufio.NewReaderSize(body, 16<<10)}
}

func (f *azureFilter) Read(p []byte) (int, error) {
	for f.off == len(f.out) {
		if f.err != nil {
			return 0, f.err
		}
		f.out, f.off = f.out[:0], 0
		// One event: lines up to a blank line.
		for {
			line, err := f.r.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				// A line longer than the buffer: pass it on in pieces.
				f.out = append(f.out, line...)
				continue
			}
			f.out = append(f.out, line...)
			if err != nil {
				f.err = err
				break
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if f.drop(f.out) {
			f.out = f.out[:0]
		}
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

// drop reports whether an event is one of Azure's extras.
func (f *azureFilter) drop(ev []byte) bool {
	i := bytes.Index(ev, []byte("data:"))
	if i < 0 {
		return false
	}
	data := bytes.TrimSpace(ev[i+5:])
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	// Most chunks are neither: decode only those that may be.
	if !bytes.Contains(data, []byte(`"choices":[]`)) && !bytes.Contains(data, []byte(`"finish_reason":"`)) &&
		!(f.finished && bytes.Contains(data, []byte(`content_filter`))) {
		return false
	}
	var c struct {
		Choices []struct {
			Delta        json.RawMessage `json:"delta"`
			FinishReason *string         `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		return false
	}
	if len(c.Choices) == 0 {
		return len(c.Usage) == 0 || string(c.Usage) == "null"
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil {
			f.finished = true
			return false
		}
	}
	if f.finished {
		for _, ch := range c.Choices {
			if d := bytes.TrimSpace(ch.Delta); len(d) > 2 && string(d) != "null" {
				return false
			}
		}
		return len(c.Usage) == 0 || string(c.Usage) == "null"
	}
	return false
}

func (f *azureFilter) Close() error { return f.body.Close() }
