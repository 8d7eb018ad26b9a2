package upstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// paramHeaders are a 2026-07-28 server's x-mcp-header bindings, learnt
// from its tools/list results: the tool arguments a tools/call mirrors into
// Mcp-Param-{Name} headers. A tool whose annotations break the spec's
// rules gets no headers (the server then refuses its calls); the spec has
// clients drop such a tool from tools/list, which this client leaves to
// its caller.
type paramHeaders struct {
	mu    sync.Mutex
	tools map[string][]paramBinding
}

type paramBinding struct {
	path   []string
	header string
}

// learn records the bindings of the tools in a tools/list result.
func (p *paramHeaders) learn(result json.RawMessage) {
	if !strings.Contains(string(result), "x-mcp-header") {
		return
	}
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tools == nil {
		p.tools = map[string][]paramBinding{}
	}
	for _, t := range r.Tools {
		var b []paramBinding
		if collectBindings(t.InputSchema, nil, &b) && len(b) > 0 {
			p.tools[t.Name] = b
		} else {
			delete(p.tools, t.Name)
		}
	}
}

type schemaNode struct {
	Type       json.RawMessage            `json:"type"`
	Header     json.RawMessage            `json:"x-mcp-header"`
	Properties map[string]json.RawMessage `json:"properties"`
}

// collectBindings walks a schema's properties chain; it reports false for
// an annotation the spec calls invalid.
func collectBindings(schema json.RawMessage, path []string, out *[]paramBinding) bool {
	var n schemaNode
	if len(schema) == 0 || json.Unmarshal(schema, &n) != nil {
		return true
	}
	for name, sub := range n.Properties {
		var c schemaNode
		if json.Unmarshal(sub, &c) != nil {
			continue
		}
		p := append(append([]string(nil), path...), name)
		if c.Header != nil {
			var h string
			var typ string
			_ = json.Unmarshal(c.Type, &typ)
			if json.Unmarshal(c.Header, &h) != nil || !token(h) || (typ != "string" && typ != "integer" && typ != "boolean") {
				return false
			}
			for _, b := range *out {
				if strings.EqualFold(b.header, h) {
					return false
				}
			}
			*out = append(*out, paramBinding{path: p, header: h})
		}
		if !collectBindings(sub, p, out) {
			return false
		}
	}
	return true
}

// headers are the Mcp-Param-* headers of a tools/call's params.
func (p *paramHeaders) headers(params json.RawMessage) http.Header {
	var c struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(params, &c) != nil {
		return nil
	}
	p.mu.Lock()
	bs := p.tools[c.Name]
	p.mu.Unlock()
	var h http.Header
	for _, b := range bs {
		v, ok := lookup(c.Arguments, b.path)
		if !ok {
			continue
		}
		if h == nil {
			h = http.Header{}
		}
		h["Mcp-Param-"+b.header] = []string{headerValue(v)}
	}
	return h
}

// lookup reads a primitive at path in args as the header carries it.
func lookup(args json.RawMessage, path []string) (string, bool) {
	cur := args
	for _, k := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return "", false
		}
		var ok bool
		if cur, ok = obj[k]; !ok {
			return "", false
		}
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(cur)))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return strconv.FormatInt(i, 10), true
		}
		if f, err := v.Float64(); err == nil && f == float64(int64(f)) {
			return strconv.FormatInt(int64(f), 10), true
		}
	}
	return "", false
}

// refreshParams reads the server's tools/list anew after it refused a
// tools/call for its headers; it reports whether it did.
func (h *httpServer) refreshParams(ctx context.Context, s *session) bool {
	cursor := ""
	for page := 0; page < 100; page++ {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		msg, _, err := h.exchange(ctx, s, "tools/list", params)
		if err != nil || msg.Result == nil {
			return page > 0
		}
		h.params.learn(msg.Result)
		var r struct {
			NextCursor string `json:"nextCursor"`
		}
		_ = json.Unmarshal(msg.Result, &r)
		if cursor = r.NextCursor; cursor == "" {
			return true
		}
	}
	return true
}
