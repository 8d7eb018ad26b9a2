package gateway

import (
	"bytes"
	"cmp"
	"errors"
	"net/http"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/config"
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
// object; errors keep OpenAI's error object. With a response store
// (Options.Responses), previous_response_id continues a stored response
// (its chain's items come before the input), item_reference items are
// read from the store, and a response with store true (the default) is
// kept once it ends (responses_state.go). A route whose upstream speaks
// the Responses API itself (provider.Passes: providers[].responses) gets
// the client's body as sent, but for its model and a max_output_tokens the
// context guard lowered, and the client gets the upstream's events (or
// response object) as they came, measured and billed from the terminal
// event's usage; what only such a route can serve (prompt, truncation, …:
// responses.Parsed.Untranslatable) makes the others skip with a 400 naming
// it. Built-in tools (web_search, …) prefer such a route (call.prefer); a
// route that translates leaves out those its adapter does not map
// (provider.ToolRunner), naming them in X-Streamgate-Dropped-Tools
// (builtin.go), or, with responses.builtin_tools: reject, skips with a
// 400 as for the others. A request that uses the gateway's state (previous_response_id,
// item_reference) is not passed through (its ids are the gateway's, not
// the upstream's), and an answer passed through is not stored. A request
// with mcp tools is run by the gateway (hostedResponses, hostedmcp.go),
// each of its model calls a request of this handler.
func (g *Gateway) responsesAPI(w http.ResponseWriter, r *http.Request) {
	if isUpgrade(r) { // WebSocket mode (websocket.go)
		g.responsesSocket(w, r)
		return
	}
	if g.hosted != nil && !isHostedRound(r.Context()) && g.hostedResponses(w, r) { // mcp tools (hostedmcp.go)
		return
	}
	info := infoFrom(r.Context())
	c := newCall(info)
	defer g.finish(c)
	var (
		meta *responses.Meta
		st   *toStore
	)
	parse := func(w http.ResponseWriter, r *http.Request) (*provider.Request, string, error) {
		req, m, s, err := g.parseResponses(w, r, c.entry.KeyID)
		if err != nil {
			return nil, "", err
		}
		meta, st = m, s
		return req, m.Model, nil
	}
	req, routes := g.admit(w, r, c, parse, chatRoutes)
	if req == nil {
		return
	}
	if len(req.Builtins) > 0 && req.Native != nil {
		// A route that runs the built-in tools as sent goes first.
		c.prefer = func(t *target) bool { return provider.Passes(t.provider, req) }
	}
	if st != nil {
		// Reads of this id wait for its write from now on: a client that
		// continues the response as soon as its last event arrived finds it.
		st.id = meta.ID
		defer g.keep(st, g.respStore.Begin(meta.ID))
	}
	if req.Stream {
		enc := responses.NewEncoder(meta)
		// A response that ends without its upstream's usage reports the
		// prompt as the ledger estimates it.
		enc.EstimatePrompt = func() int { return c.bill.promptTokens(req) }
		if st != nil {
			enc.OnEnd = func(resp []byte, output []responses.OutputItem) {
				st.body = append(st.body[:0], resp...)
				st.output = append(st.output[:0], output...)
			}
		}
		info.enc = enc
		g.stream(w, r, c, routes, req)
		return
	}
	c.reshape = func(body []byte) ([]byte, error) {
		out, output, err := responses.FromCompletion(body, meta)
		if st != nil && err == nil {
			st.body, st.output = out, output
		}
		return out, err
	}
	c.passUsage = responses.AnswerUsage
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

// parseResponses reads a Responses request of the key keyID and
// translates it into the chat request the routes take: with a response
// store, the chain of its previous_response_id first and its item
// references resolved. st is what to store of it, nil when it is not
// stored.
func (g *Gateway) parseResponses(w http.ResponseWriter, r *http.Request, keyID string) (_ *provider.Request, _ *responses.Meta, st *toStore, _ error) {
	body, err := g.readBody(w, r)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := oneReading(body, responsesFields); err != nil {
		return nil, nil, nil, err
	}
	var rq responses.Request
	if err := responses.Decode(body, &rq); err != nil {
		return nil, nil, nil, decodeError(err)
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		// Only a JSON null decodes into a struct without error.
		return nil, nil, nil, invalid("", "invalid JSON body: want an object, got null")
	}
	rq.Warmup = isWarmup(r.Context())
	if err := g.mcpTools(&rq); err != nil {
		return nil, nil, nil, err
	}
	stateful := usesState(&rq)                // before resolveState replaces the references
	if s := socketOf(r.Context()); s != nil { // a frame of the Responses WebSocket: the socket's state first
		if st, err = g.socketState(r.Context(), s, keyID, &rq); err != nil {
			return nil, nil, nil, responsesError(err)
		}
	} else if g.respStore != nil {
		if st, err = g.resolveState(r.Context(), keyID, &rq); err != nil {
			return nil, nil, nil, responsesError(err)
		}
	}
	p, err := rq.Parse()
	if err != nil {
		if err = responsesError(err); !errors.As(err, new(*invalidError)) {
			err = invalid("", "%v", err)
		}
		return nil, nil, nil, err
	}
	req := &provider.Request{Stream: rq.Stream, Body: p.Body, Chat: p.Chat}
	u := p.Untranslatable
	if g.cur().cfg.Responses.BuiltinTools == config.BuiltinReject {
		u = cmp.Or(u, p.BuiltinErr)
		if u != nil && stateful {
			// No route passes a request with the gateway's ids through.
			return nil, nil, nil, invalid(u.Param, "%s", u.Msg)
		}
		if p.Chat != nil {
			p.Chat.WebSearch = nil
		}
	} else {
		req.Builtins = p.Builtins
	}
	if !stateful {
		req.Native = &provider.Native{Dialect: provider.DialectResponses, Body: body}
		if u != nil {
			req.Native.Err = &provider.Error{Status: http.StatusBadRequest, Retryable: true, Type: "invalid_request_error",
				Code: "unsupported_parameter", Message: u.Msg, Err: provider.ErrUntranslatable}
		}
	}
	return req, p.Meta, st, nil
}

// usesState reports whether rq refers to the gateway's stored responses
// (previous_response_id, item_reference items): ids an upstream that
// speaks the Responses API itself does not know.
func usesState(rq *responses.Request) bool {
	return rq.PreviousResponseID != nil && *rq.PreviousResponseID != "" || responses.HasReference(rq.Input)
}

// responsesError is the client's error of a *responses.Error (a 400
// naming the field); other errors are returned as they are.
func responsesError(err error) error {
	var re *responses.Error
	if errors.As(err, &re) {
		return invalid(re.Param, "%s", re.Msg)
	}
	return err
}
