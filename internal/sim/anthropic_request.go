package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// anthropicRequest is the part of a Messages request the simulator reads.
// The anthropic-version and anthropic-beta headers are accepted and
// ignored; the API key (x-api-key or a bearer token) owns the prompt cache.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens *int               `json:"max_tokens"`
	Messages  []anthropicMessage `json:"messages"`
	// System is a string or an array of text blocks.
	System json.RawMessage   `json:"system"`
	Stream bool              `json:"stream"`
	Tools  []json.RawMessage `json:"tools"`
	// Thinking is {"type":"enabled","budget_tokens":N}, {"type":"adaptive"}
	// or {"type":"disabled"}, with an optional "display".
	Thinking    json.RawMessage `json:"thinking"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	Temperature *float64        `json:"temperature"`
	// CacheControl at the top level is automatic caching: a breakpoint on
	// the last block.
	CacheControl json.RawMessage `json:"cache_control"`
}

type anthropicMessage struct {
	Role string `json:"role"`
	// Content is a string or an array of content blocks.
	Content json.RawMessage `json:"content"`
}

// anthropicBlockIn is a content block of a request, as the sim reads it.
type anthropicBlockIn struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	Content      json.RawMessage `json:"content"` // tool_result
	Thinking     *string         `json:"thinking"`
	Signature    *string         `json:"signature"`
	Data         string          `json:"data"` // redacted_thinking
	Name         string          `json:"name"` // tool_use
	Input        json.RawMessage `json:"input"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// tokens is a block's prompt tokens: its text, a tool_use's name and
// input, a tool_result's content. Thinking blocks count none (Anthropic
// strips those of earlier turns from the prompt), nor do images and
// documents (the sim does not look inside them).
func (b *anthropicBlockIn) tokens() int {
	switch b.Type {
	case "thinking", "redacted_thinking":
		return 0
	case "tool_use":
		return estimateTokens(b.Name) + estimateTokens(string(canonicalJSON(b.Input)))
	}
	n := estimateTokens(b.Text)
	if c, err := anthropicRead(b.Content); err == nil {
		n += c.tokens
	}
	return n
}

// anthropicContent is a content value (a string, or an array of blocks) as
// the engine reads it.
type anthropicContent struct {
	blocks []anthropicBlockIn
	// raws are the blocks as sent (a string content: one text block made
	// of it), for the prompt cache's canonical bytes.
	raws []json.RawMessage
	// all is every text, tool_result blocks' included: whether a system
	// prompt is there.
	all string
	// tokens is the sum of the blocks' tokens.
	tokens int
	// texts are the string or the text blocks: what the prompt hash and a
	// prefill take.
	texts []string
	// textOnly is true for a string or an array of text blocks only.
	textOnly bool
}

// anthropicRead reads a content value.
func anthropicRead(raw json.RawMessage) (anthropicContent, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return anthropicContent{}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		block, _ := json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{"text", s})
		return anthropicContent{blocks: []anthropicBlockIn{{Type: "text", Text: s}}, raws: []json.RawMessage{block},
			all: s, tokens: estimateTokens(s), texts: []string{s}, textOnly: true}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return anthropicContent{}, errors.New("must be a string or an array of content blocks")
	}
	c := anthropicContent{raws: raws, blocks: make([]anthropicBlockIn, len(raws)), textOnly: true}
	var b strings.Builder
	for i, r := range raws {
		bl := &c.blocks[i]
		if err := json.Unmarshal(r, bl); err != nil {
			return anthropicContent{}, fmt.Errorf("%d: must be a content block object", i)
		}
		b.WriteString(bl.Text)
		if bl.Type == "text" {
			c.texts = append(c.texts, bl.Text)
		} else {
			c.textOnly = false
		}
		if t, err := anthropicRead(bl.Content); err == nil {
			b.WriteString(t.all)
		}
		c.tokens += bl.tokens()
	}
	c.all = b.String()
	return c, nil
}

// anthropicThinking is the request's thinking object.
type anthropicThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"`
}

// Anthropic's documentation page its thinking errors point to.
const thinkingDocs = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"

// anthropicThinkingAsk validates the thinking object as the API does:
// budget_tokens of at least 1024 and below max_tokens (count_tokens takes
// no max_tokens), display summarized or omitted.
func anthropicThinkingAsk(body *anthropicRequest, count bool) (thinkingAsk, error) {
	ask := thinkingAsk{mode: thinkOff}
	if len(body.Thinking) == 0 || string(body.Thinking) == "null" {
		return ask, nil
	}
	var t anthropicThinking
	if err := json.Unmarshal(body.Thinking, &t); err != nil {
		return ask, paramError{"thinking", "thinking: Input should be a valid dictionary or object"}
	}
	switch t.Type {
	case "disabled":
		return ask, nil
	case "enabled":
		switch {
		case t.BudgetTokens == nil:
			return ask, paramError{"thinking", "thinking.enabled.budget_tokens: Field required"}
		case *t.BudgetTokens < 1024:
			return ask, paramError{"thinking", "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"}
		case !count && body.MaxTokens != nil && *t.BudgetTokens >= *body.MaxTokens:
			return ask, paramError{"max_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at " +
				thinkingDocs + "#max-tokens-and-context-window-size"}
		}
		ask.budget = *t.BudgetTokens
	case "adaptive":
	default:
		return ask, paramError{"thinking", fmt.Sprintf("thinking: Input tag '%s' found using 'type' does not match any of the expected tags: 'adaptive', 'disabled', 'enabled'", t.Type)}
	}
	switch t.Display {
	case "", "summarized":
		ask.visible = true
	case "omitted":
		ask.omitted = true
	default:
		return ask, paramError{"thinking", fmt.Sprintf("thinking.%s.display: Input should be 'summarized' or 'omitted'", t.Type)}
	}
	ask.mode = thinkOn
	var choice struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(body.ToolChoice, &choice) == nil && (choice.Type == "any" || choice.Type == "tool") {
		return ask, paramError{"tool_choice", "Thinking may not be enabled when tool_choice forces tool use."}
	}
	if body.Temperature != nil && *body.Temperature != 1 {
		return ask, paramError{"temperature", "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at " +
			thinkingDocs + "#feature-compatibility"}
	}
	return ask, nil
}

// signedBlock is a thinking or redacted_thinking block passed back, to
// verify against the sim's signer.
type signedBlock struct {
	path     string // messages.N.content.M
	text     string // thinking
	sig      string
	redacted bool
	data     string
}

// verifyThinking refuses the first block whose signature (or data) this
// sim did not issue, in Anthropic's words.
func (s *Server) verifyThinking(blocks []signedBlock) error {
	for _, b := range blocks {
		if b.redacted && !s.signer.verifyRedacted(b.data) {
			return paramError{"messages", b.path + ": Invalid `data` in `redacted_thinking` block"}
		}
		if !b.redacted && !s.signer.verify(b.text, b.sig) {
			return paramError{"messages", b.path + ": Invalid `signature` in `thinking` block"}
		}
	}
	return nil
}

// cacheControl is a block's cache_control.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl"`
}

// readCacheControl validates a cache_control value at path: ok is false
// when there is none.
func readCacheControl(raw json.RawMessage, path string) (ttl time.Duration, ok bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	var cc cacheControl
	if json.Unmarshal(raw, &cc) != nil {
		return 0, false, paramError{path, path + ": Input should be a valid dictionary or object"}
	}
	if cc.Type != "ephemeral" {
		return 0, false, paramError{path, path + ".type: Input should be 'ephemeral'"}
	}
	switch cc.TTL {
	case "", "5m":
		return cacheTTL5m, true, nil
	case "1h":
		return cacheTTL1h, true, nil
	}
	return 0, false, paramError{path, path + ".ttl: Input should be '5m' or '1h'"}
}

// maxBreakpoints is the most cache_control blocks a request may carry.
const maxBreakpoints = 4

// anthropicUnit is one block of the prompt in Anthropic's cache order
// (tools, system, messages), for the prompt cache.
type anthropicUnit struct {
	lead   string // a separator starting a system prompt or a message ("" inside one)
	raw    json.RawMessage
	tokens int // the block's tokens, the lead's 3 included
	ttl    time.Duration
	brk    bool // carries cache_control
	path   string
}

// anthropicParse validates a Messages request as the API does (model,
// max_tokens and messages are required; thinking, cache_control and the
// thinking blocks passed back as Anthropic checks them) and reads what the
// engine needs. count is true for count_tokens, which takes no max_tokens.
// Signatures are verified by the caller (req.signed).
func anthropicParse(body *anthropicRequest, count bool) (*request, error) {
	switch {
	case body.Model == "":
		return nil, paramError{"model", "model: Field required"}
	case body.MaxTokens == nil && !count:
		return nil, paramError{"max_tokens", "max_tokens: Field required"}
	case body.MaxTokens != nil && *body.MaxTokens < 1 && !count:
		return nil, paramError{"max_tokens", "max_tokens: Input should be greater than or equal to 1"}
	case len(body.Messages) == 0:
		return nil, paramError{"messages", "messages: Field required"}
	}
	think, err := anthropicThinkingAsk(body, count)
	if err != nil {
		return nil, err
	}
	req := &request{model: body.Model, stream: body.Stream, promptTokens: 3, thinking: think}
	if body.MaxTokens != nil {
		req.limit = *body.MaxTokens
	}
	// The request's own 3 tokens (promptTokens' start) are the reply's
	// priming, after every block: never cached.
	var units []anthropicUnit
	breaks := 0
	unit := func(u anthropicUnit, cc json.RawMessage) error {
		ttl, ok, err := readCacheControl(cc, u.path+".cache_control")
		if err != nil {
			return err
		}
		u.ttl, u.brk = ttl, ok
		if ok {
			breaks++
		}
		req.promptTokens += u.tokens
		units = append(units, u)
		return nil
	}

	for i, raw := range body.Tools {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &head) == nil && strings.HasPrefix(head.Type, "web_search") {
			if err := anthropicSearchTool(raw, i); err != nil {
				return nil, err
			}
			req.search = true
		}
		var t struct {
			Name         string          `json:"name"`
			InputSchema  json.RawMessage `json:"input_schema"`
			CacheControl json.RawMessage `json:"cache_control"`
		}
		if json.Unmarshal(raw, &t) != nil {
			return nil, paramError{"tools", fmt.Sprintf("tools.%d: Input should be a valid dictionary or object", i)}
		}
		if t.Name != "" && !strings.HasPrefix(head.Type, "web_search") {
			req.tools = append(req.tools, tool{name: t.Name, schema: t.InputSchema})
		}
		u := anthropicUnit{raw: raw, tokens: estimateTokens(string(canonicalJSON(raw, "cache_control"))), path: fmt.Sprintf("tools.%d", i)}
		if err := unit(u, t.CacheControl); err != nil {
			return nil, err
		}
	}

	sys, err := anthropicRead(body.System)
	if err != nil {
		return nil, paramError{"system", "system: " + err.Error()}
	}
	h := newPromptHash()
	for _, t := range sys.texts {
		h.add(t)
	}
	if sys.all != "" {
		for j := range sys.blocks {
			u := anthropicUnit{raw: sys.raws[j], tokens: sys.blocks[j].tokens(), path: fmt.Sprintf("system.%d", j)}
			if j == 0 {
				u.lead, u.tokens = "system", u.tokens+3
			}
			if err := unit(u, sys.blocks[j].CacheControl); err != nil {
				return nil, err
			}
		}
	}

	last := len(body.Messages) - 1
	contents := make([]anthropicContent, len(body.Messages))
	for i, m := range body.Messages {
		c, err := anthropicRead(m.Content)
		if err != nil {
			return nil, paramError{"messages", fmt.Sprintf("messages.%d.content: %v", i, err)}
		}
		contents[i] = c
		if m.Role == "user" {
			req.question = strings.Join(c.texts, " ")
		}
		lead := m.Role
		if i == 0 {
			// Changing the thinking settings invalidates the cached
			// messages, not the tools and system (Anthropic's prompt
			// caching reference, "Caching with thinking blocks").
			lead += "\x00" + think.cacheKey()
		}
		if len(c.blocks) == 0 {
			req.promptTokens += 3
			units = append(units, anthropicUnit{lead: lead, tokens: 3})
		}
		for j := range c.blocks {
			bl := &c.blocks[j]
			path := fmt.Sprintf("messages.%d.content.%d", i, j)
			u := anthropicUnit{raw: c.raws[j], tokens: bl.tokens(), path: path}
			if j == 0 {
				u.lead, u.tokens = lead, u.tokens+3 // the message's own 3
			}
			if err := unit(u, bl.CacheControl); err != nil {
				return nil, err
			}
			if m.Role != "assistant" {
				continue
			}
			switch bl.Type {
			case "thinking":
				switch {
				case bl.Thinking == nil:
					return nil, paramError{"messages", path + ".thinking.thinking: Field required"}
				case bl.Signature == nil:
					return nil, paramError{"messages", path + ".thinking.signature: Field required"}
				}
				req.signed = append(req.signed, signedBlock{path: path, text: *bl.Thinking, sig: *bl.Signature})
			case "redacted_thinking":
				req.signed = append(req.signed, signedBlock{path: path, redacted: true, data: bl.Data})
			}
		}
	}
	if err := anthropicTurnRules(body.Messages, contents, think); err != nil {
		return nil, err
	}

	for i, m := range body.Messages {
		c := &contents[i]
		if i == last && m.Role == "assistant" {
			text := strings.Join(c.texts, "")
			// The API refuses a prefill ending in white space; a gateway
			// continuing a cut stream must trim it (and the sim then
			// continues from inside the token the space began).
			if endsInSpace(text) && !count {
				return nil, paramError{"messages", "messages: final assistant content cannot end with trailing whitespace"}
			}
			if c.textOnly {
				req.prefix = text
				break
			}
		}
		for _, t := range c.texts {
			h.add(t)
		}
	}
	req.prompt = h

	// Automatic caching: a breakpoint on the last block.
	if ttl, ok, err := readCacheControl(body.CacheControl, "cache_control"); err != nil {
		return nil, err
	} else if ok {
		if u := &units[len(units)-1]; !u.brk {
			u.brk, u.ttl = true, ttl
			breaks++
		}
	}
	if breaks > maxBreakpoints {
		return nil, paramError{"messages", fmt.Sprintf("A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, breaks)}
	}
	if breaks > 0 {
		var short string
		for _, u := range units {
			switch {
			case u.brk && u.ttl == cacheTTL5m && short == "":
				short = u.path
			case u.brk && u.ttl == cacheTTL1h && short != "":
				return nil, paramError{"messages", fmt.Sprintf("%s.cache_control: a ttl='1h' cache breakpoint cannot come after a ttl='5m' one (%s): longer TTLs must come first", u.path, short)}
			}
		}
		req.cache = func(int) *cacheQuery { return anthropicCacheQuery(units) }
	}
	return req, nil
}

// anthropicTurnRules applies Anthropic's rules on thinking blocks in the
// turn being answered. With thinking enabled (not adaptive, where the model
// may not think), the assistant message after the last user message that
// is not only tool results (a prefill, or the first step of a tool loop)
// must start with a thinking or redacted_thinking block; without thinking,
// a final assistant message may hold none; a final assistant message may
// not end with one.
func anthropicTurnRules(msgs []anthropicMessage, contents []anthropicContent, think thinkingAsk) error {
	lastUser := -1
	for i, m := range msgs {
		if m.Role != "user" {
			continue
		}
		for _, bl := range contents[i].blocks {
			if bl.Type != "tool_result" {
				lastUser = i
				break
			}
		}
	}
	last := len(msgs) - 1
	// budget > 0: type enabled (adaptive has none).
	if a := lastUser + 1; think.mode == thinkOn && think.budget > 0 && a <= last && msgs[a].Role == "assistant" {
		found := "nothing"
		if bl := contents[a].blocks; len(bl) > 0 {
			found = "`" + bl[0].Type + "`"
		}
		if found != "`thinking`" && found != "`redacted_thinking`" {
			return paramError{"messages", fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found %s. "+
				"When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of "+
				"`tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this "+
				"requirement, disable `thinking`. Please consult our documentation at %s", a, found, thinkingDocs)}
		}
	}
	if msgs[last].Role != "assistant" {
		return nil
	}
	blocks := contents[last].blocks
	for j, bl := range blocks {
		if think.mode != thinkOn && (bl.Type == "thinking" || bl.Type == "redacted_thinking") {
			return paramError{"messages", fmt.Sprintf("messages.%d.content.%d: When thinking is disabled, an `assistant` message in the "+
				"final position cannot contain `%s`. To use thinking blocks, enable `thinking` in your request.", last, j, bl.Type)}
		}
	}
	if n := len(blocks); n > 0 && (blocks[n-1].Type == "thinking" || blocks[n-1].Type == "redacted_thinking") {
		return paramError{"messages", fmt.Sprintf("messages.%d: The final block in an assistant message cannot be `%s`.", last, blocks[n-1].Type)}
	}
	return nil
}

// anthropicCacheQuery reads the units as canonical bytes with a checkpoint
// after each block; the breakpoints are those with cache_control.
func anthropicCacheQuery(units []anthropicUnit) *cacheQuery {
	ph := newPrefixHasher()
	q := &cacheQuery{lookback: anthropicLookback}
	for _, u := range units {
		if u.lead != "" {
			ph.fixed([]byte("\x00"+u.lead+"\x00"), 0)
		}
		var b []byte
		if u.raw != nil {
			b = canonicalJSON(u.raw, "cache_control")
		}
		ph.fixed(b, u.tokens)
		if at := ph.mark(); u.brk {
			q.breaks = append(q.breaks, breakpoint{at: at, ttl: u.ttl})
		}
	}
	q.points = ph.points
	return q
}

// anthropicLookback is how many block boundaries before a breakpoint are
// looked up for a hit (Anthropic: "about 20 blocks").
const anthropicLookback = 20

// messages serves POST /v1/messages, and with count POST
// /v1/messages/count_tokens: {"input_tokens":N}, the prompt tokens a
// Message reports (usage.input_tokens plus the cache's reads and writes).
func (s *Server) messages(count bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.m.requests.Inc()
		d := anthropicDialect{}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			d.writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
			return
		}
		var body anthropicRequest
		if status, err := decodeBody(w, r, &body); err != nil {
			d.requestError(w, status, err)
			return
		}
		req, err := anthropicParse(&body, count)
		if err == nil {
			err = s.verifyThinking(req.signed)
		}
		if err != nil {
			d.requestError(w, http.StatusBadRequest, err)
			return
		}
		if count {
			writeJSON(w, http.StatusOK, map[string]int{"input_tokens": req.promptTokens})
			return
		}
		s.serve(w, r, req, d)
	}
}
