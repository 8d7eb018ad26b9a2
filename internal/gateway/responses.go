package gateway

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/responses"
)

// responsesAPI serves POST /v1/responses, OpenAI's Responses API, for any
// configured model on any route. The request is turned into the chat
// request every route understands (responses.Request.Parse) and takes the
// chat path: authentication, routes, fallback, hedging, continuation,
// timeouts, budgets, relay measurements, traces and the one usage entry
// apply as for /v1/chat/completions. A stream is written as the Responses
// events by responses.Encoder, a non-stream answer turned into a response
// object; errors keep OpenAI's error object. Nothing is stored: a
// response cannot be read back, and previous_response_id is refused.
func (g *Gateway) responsesAPI(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	c := newCall(info)
	defer g.finish(c)
	var meta *responses.Meta
	parse := func(w http.ResponseWriter, r *http.Request) (*provider.Request, string, error) {
		req, m, err := g.parseResponses(w, r)
		if err != nil {
			return nil, "", err
		}
		meta = m
		return req, m.Model, nil
	}
	req, routes := g.admit(w, r, c, parse, g.routes)
	if req == nil {
		return
	}
	if req.Stream {
		enc := responses.NewEncoder(meta)
		// A response that ends without its upstream's usage reports the
		// prompt as the ledger estimates it.
		enc.EstimatePrompt = func() int { return c.bill.promptTokens(req) }
		info.enc = enc
		g.stream(w, r, c, routes, req)
		return
	}
	c.reshape = func(body []byte) ([]byte, error) { return responses.FromCompletion(body, meta) }
	g.complete(w, r, c, routes, req, complete)
}

// responsesFields are the members of a Responses body the gateway acts on
// (see chatFields): each must have one reading.
var responsesFields = []api.Field{
	{Name: "model"},
	{Name: "stream"},
	{Name: "max_output_tokens"},
	{Name: "instructions"},
	{Name: "input", Each: true, Fields: []api.Field{{Name: "type"}, {Name: "role"}, {Name: "content"}}},
	{Name: "tools"},
	{Name: "previous_response_id"},
	{Name: "background"},
}

// parseResponses reads a Responses request and translates it into the
// chat request the routes take.
func (g *Gateway) parseResponses(w http.ResponseWriter, r *http.Request) (*provider.Request, *responses.Meta, error) {
	body, err := g.readBody(w, r)
	if err != nil {
		return nil, nil, err
	}
	if err := oneReading(body, responsesFields); err != nil {
		return nil, nil, err
	}
	var rq responses.Request
	if err := responses.Decode(body, &rq); err != nil {
		return nil, nil, decodeError(err)
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		// Only a JSON null decodes into a struct without error.
		return nil, nil, invalid("", "invalid JSON body: want an object, got null")
	}
	p, err := rq.Parse()
	if err != nil {
		var re *responses.Error
		if errors.As(err, &re) {
			return nil, nil, invalid(re.Param, "%s", re.Msg)
		}
		return nil, nil, invalid("", "%v", err)
	}
	return &provider.Request{Stream: rq.Stream, Body: p.Body, Chat: p.Chat}, p.Meta, nil
}
