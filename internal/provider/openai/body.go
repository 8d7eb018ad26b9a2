package openai

import (
	"fmt"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// Body returns the upstream body for req: the client's members copied byte
// for byte in their order, "model" set to the route's model (first) and, for
// streams, "stream": true and stream_options.include_usage forced so usage
// is always known; a non-stream request gets "stream": false and no
// stream_options (OpenAI rejects stream_options without stream). The client's
// own "model", "stream" and "stream_options" members are dropped (the last
// stream_options' other members are kept). A nil req.Body counts as {}.
// Nothing is decoded or re-encoded but the member keys and stream_options.
func Body(req *provider.Request, stream bool) ([]byte, error) {
	return appendBody(make([]byte, 0, len(req.Body)+len(req.Model)+64), req, stream)
}

func appendBody(b []byte, req *provider.Request, stream bool) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = api.AppendString(b, req.Model)
	var opts []byte // the client's last stream_options value
	cacheKey := req.CacheKey != ""
	if len(req.Body) > 0 {
		err := api.EachMember(req.Body, func(key, member, value []byte) error {
			switch string(key) {
			case "model", "stream":
				return nil
			case "stream_options":
				opts = value
				return nil
			case "prompt_cache_key":
				cacheKey = false // the client's own
			}
			b = append(b, ',')
			b = append(b, member...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("openai: body: %w", err)
		}
	}
	if cacheKey {
		b = append(b, `,"prompt_cache_key":`...)
		b = api.AppendString(b, req.CacheKey)
	}
	if !stream {
		return append(b, `,"stream":false}`...), nil
	}
	b = append(b, `,"stream":true,"stream_options":{"include_usage":true`...)
	if len(opts) > 0 && string(opts) != "null" {
		err := api.EachMember(opts, func(key, member, _ []byte) error {
			if string(key) != "include_usage" {
				b = append(b, ',')
				b = append(b, member...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("openai: stream_options: %w", err)
		}
	}
	return append(b, "}}"...), nil
}

// EmbeddingsBody returns the upstream body of an embeddings request: the
// client's members copied byte for byte, "model" set to the route's (first).
func EmbeddingsBody(req *provider.Request) ([]byte, error) {
	b := make([]byte, 0, len(req.Body)+len(req.Model)+16)
	b = append(b, `{"model":`...)
	b = api.AppendString(b, req.Model)
	if len(req.Body) > 0 {
		err := api.EachMember(req.Body, func(key, member, _ []byte) error {
			if string(key) != "model" {
				b = append(b, ',')
				b = append(b, member...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("openai: body: %w", err)
		}
	}
	return append(b, '}'), nil
}
