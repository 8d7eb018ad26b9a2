package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/messages"
	"github.com/streamgate/streamgate/internal/provider"
)

// messagesAPI serves POST /v1/messages, Anthropic's Messages API. A
// route whose upstream speaks it (provider.Passes: kind anthropic, a sim
// of dialect anthropic) gets the client's body as sent, but for its model
// and a max_tokens the context guard lowered, with the client's
// anthropic-version and anthropic-beta headers, and the client gets the
// upstream's events (or Message) as they came: same dialect, same bytes.
// For the routes of other kinds the request is turned into the chat
// request every route understands (messages.ToChat) and takes the chat
// path: the stream is written as Anthropic's events by messages.Encoder,
// a non-stream answer turned into a Message. Either way the chat path's
// authentication, routes, fallback (also from one kind to the other),
// relay measurements and usage entry apply, and errors take Anthropic's
// shape. Keys come as x-api-key or as a bearer token; anthropic-version is
// accepted whatever its value.
func (g *Gateway) messagesAPI(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	info.enc = messages.NewEncoder("") // rejections in Anthropic's shape
	c := newCall(info)
	defer g.finish(c)
	req, routes := g.admit(w, r, c, g.parseMessages, chatRoutes)
	if req == nil {
		return
	}
	model := c.asked
	info.enc = messages.NewEncoder(model)
	if req.Stream {
		g.stream(w, r, c, routes, req)
		return
	}
	c.reshape = func(body []byte) ([]byte, error) { return messages.FromCompletion(body, model) }
	c.passUsage = messages.AnswerUsage
	g.complete(w, r, c, routes, req, complete)
}

// parseMessages reads a Messages request: its native form (the body as
// received, its Anthropic headers) and the chat request it translates
// into. A request the translation cannot express (a block type it does not
// know, an image in a tool result, a server tool) is no error here: it has
// no chat form (provider.Native.Err), and only a route that passes it
// through may serve it.
func (g *Gateway) parseMessages(w http.ResponseWriter, r *http.Request) (*provider.Request, string, error) {
	body, err := g.readBody(w, r)
	if err != nil {
		return nil, "", err
	}
	if err := oneReading(body, messagesFields); err != nil {
		return nil, "", err
	}
	var m messages.Request
	if err := decodeObject(body, &m); err != nil {
		return nil, "", err
	}
	if err := m.Validate(); err != nil {
		return nil, "", messagesError(err)
	}
	req := &provider.Request{Stream: m.Stream,
		Native: &provider.Native{Dialect: provider.DialectAnthropic, Body: body, Header: anthropicHeaders(r)}}
	chat, err := m.ToChat()
	if err != nil {
		req.Native.Err = untranslatable(err)
		return req, m.Model, nil
	}
	out, err := json.Marshal(chat)
	if err != nil {
		return nil, "", invalid("", "encode the chat request: %v", err)
	}
	req.Body, req.Chat = out, chat
	return req, m.Model, nil
}

// anthropicHeaders are the client's headers an Anthropic upstream gets
// with its body: anthropic-version and anthropic-beta (the beta features
// Claude Code asks for), every value; nil when it sent neither.
func anthropicHeaders(r *http.Request) http.Header {
	var h http.Header
	for _, k := range []string{"Anthropic-Version", "Anthropic-Beta"} {
		if v := r.Header[k]; len(v) > 0 {
			if h == nil {
				h = http.Header{}
			}
			h[k] = v
		}
	}
	return h
}

// untranslatable is the error of a Messages request without a chat form
// on a route that would have to translate it: a 400 naming the field,
// retryable (a route that passes it through may serve it).
func untranslatable(err error) error {
	msg := err.Error()
	var me *messages.Error
	if errors.As(err, &me) && me.Param != "" && !strings.HasPrefix(me.Msg, me.Param) {
		msg = me.Param + ": " + me.Msg
	}
	return &provider.Error{Status: http.StatusBadRequest, Retryable: true, Type: "invalid_request_error",
		Code: "unsupported_parameter", Message: msg, Err: provider.ErrUntranslatable}
}

func messagesError(err error) error {
	var me *messages.Error
	if errors.As(err, &me) {
		return invalid(me.Param, "%s", me.Msg)
	}
	return invalid("", "%v", err)
}

// countTokens serves POST /v1/messages/count_tokens with an estimate of
// the request's input tokens (the gateway's estimate, on the high side: a
// token per 4 ASCII bytes and one per other character of the body).
func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	info.enc = messages.NewEncoder("")
	if r.Method != http.MethodPost {
		g.writeError(w, r, &methodError{allow: "POST"})
		return
	}
	st := g.cur()
	p, err := st.keys.Authenticate(r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	info.keyID = p.KeyID
	body, err := g.readBody(w, r)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if err := oneReading(body, messagesFields); err != nil {
		g.writeError(w, r, err)
		return
	}
	var m messages.Request
	if err := decodeObject(body, &m); err != nil {
		g.writeError(w, r, err)
		return
	}
	if m.Model == "" {
		g.writeError(w, r, invalid("model", "missing required field: model"))
		return
	}
	if mm, ok := st.cfg.Resolve(m.Model); !ok || !p.Allowed(mm.Name) {
		g.writeError(w, r, unknownModel(m.Model))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": max(1, fit.EstimateTokens(body))})
}
