package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/messages"
	"github.com/streamgate/streamgate/internal/provider"
)

// messagesAPI serves POST /v1/messages, Anthropic's Messages API: the
// request is turned into the chat request every route understands and then
// takes the chat path (authentication, routes, fallback, relay, usage
// entry); the stream is written as Anthropic's events by messages.Encoder,
// a non-stream answer turned into a Message, and errors take Anthropic's
// shape. Keys come as x-api-key or as a bearer token; anthropic-version is
// accepted whatever its value.
func (g *Gateway) messagesAPI(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	info.enc = messages.NewEncoder("") // rejections in Anthropic's shape
	c := newCall(info)
	defer g.finish(c)
	req, routes := g.admit(w, r, c, g.parseMessages, g.routes)
	if req == nil {
		return
	}
	model := c.entry.Model
	info.enc = messages.NewEncoder(model)
	if req.Stream {
		g.stream(w, r, c, routes, req)
		return
	}
	c.reshape = func(body []byte) ([]byte, error) { return messages.FromCompletion(body, model) }
	g.complete(w, r, c, routes, req, complete)
}

// parseMessages reads a Messages request and turns it into a chat request.
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
	chat, err := m.ToChat()
	if err != nil {
		return nil, "", messagesError(err)
	}
	out, err := json.Marshal(chat)
	if err != nil {
		return nil, "", invalid("", "encode the chat request: %v", err)
	}
	return &provider.Request{Stream: chat.Stream, Body: out, Chat: chat}, m.Model, nil
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
	p, err := g.keys.Authenticate(r)
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
	if _, ok := g.cfg.Model(m.Model); !ok || !p.Allowed(m.Model) {
		g.writeError(w, r, unknownModel(m.Model))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": max(1, fit.EstimateTokens(body))})
}
