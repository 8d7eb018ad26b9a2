// Package anthropic is the provider adapter of kind "anthropic": it sends the
// client's OpenAI chat request to Anthropic's Messages API (POST /v1/messages,
// anthropic-version 2023-06-01) and gives the gateway the OpenAI dialect back,
// translating the event stream chunk by chunk as it is read (no event waits
// for another) and the non-stream answer whole. Shapes follow Anthropic's API
// reference and its official Go SDK (anthropic-sdk-go).
//
// # Passthrough: a Messages client
//
// A request of a Messages client (provider.Request.Native of dialect
// anthropic, POST /v1/messages) is not translated: the Client speaks it
// (provider.Speaker). The upstream gets the client's body with only
// "model" set to the route's model (NativeBody: every other member byte
// for byte, cache_control, signed thinking blocks, fields and block types
// to come included) and the client's anthropic-version (over Version) and
// anthropic-beta headers. The stream's events are returned as they came
// (a provider.Passthrough stream), each read by the rules of the
// translation below (JSON, order, message_stop, "error" events) for what
// the relay measures: content for non-empty text, thinking and tool
// argument deltas and a tool_use block's start, the finish and the usage
// so far with message_delta. A non-stream answer is the Message as it
// came ({"type":"error"} with 200 is that error). Everything below is the
// translation for OpenAI clients.
//
// # Base URL and headers
//
// base_url is the one Anthropic documents, "https://api.anthropic.com":
// requests go to {base}/v1/messages; a base URL ending in "/v1" gets
// {base}/messages. Headers: x-api-key, anthropic-version, content-type,
// accept, X-Request-Id (the gateway's request id) and the request's
// forwarded headers (X-Sim-*).
//
// # Request: OpenAI → Messages
//
//	model                        the route's model
//	system, developer messages   top-level "system" text blocks, in order, cache_control kept
//	                             (their position among the turns is lost: the API has none)
//	user / assistant messages    turns; consecutive turns of one role are merged (the API
//	                             wants them alternating); empty text parts are dropped (the API
//	                             rejects empty text blocks), so is a message left empty
//	content parts                text → text block (cache_control kept); image_url with a
//	                             base64 data: URL → image, source base64 + media_type; with an
//	                             http(s) URL → image, source url; file with a base64 PDF
//	                             data: URL → document, source base64; a /v1/messages client's
//	                             document block (ContentPart.Document) → as it was sent;
//	                             other part types → rejected, retryable (see Errors)
//	assistant tool_calls         tool_use blocks {id, name, input}: input is the parsed
//	                             arguments, "" → {}; arguments that are not a JSON object →
//	                             400, not retryable
//	assistant thinking_blocks    thinking {thinking, signature} and redacted_thinking {data}
//	                             blocks, first in the turn, in order (LiteLLM's field);
//	                             one without its signature or data is dropped
//	assistant reasoning_content  dropped: thinking blocks must carry Anthropic's signature
//	assistant refusal parts      dropped
//	tool messages                a user turn of tool_result blocks {tool_use_id, content},
//	                             merged with the tool messages next to it; tool_result blocks
//	                             go first in their turn, as the API requires. A /v1/messages
//	                             client's tool_result (api.Message.ToolResult: images,
//	                             documents, is_error, cache_control) is sent as it came, and
//	                             the user message repeating its images for OpenAI routes
//	                             (Attached) is dropped
//	cache_control                kept on system, text, image and document parts, and, from a
//	                             /v1/messages client, on tools, tool_use and tool_result
//	max_completion_tokens,       max_tokens; absent (or ≤ 0): DefaultMaxTokens (4096), since
//	max_tokens                   the API requires one
//	temperature                  temperature, clamped to Anthropic's 0–1 (OpenAI allows 0–2)
//	top_p                        top_p, dropped when temperature is also set (recent models
//	                             reject both together)
//	top_k (not OpenAI's)         top_k
//	stop                         stop_sequences (empty strings dropped)
//	tools (type function)        {name, description, input_schema: parameters, or an empty
//	                             object schema; strict}; other tool types → rejected, retryable
//	WebSearch (not encoded; the  the web search server tool {type:web_search_20250305,
//	Responses front's web_search) name:web_search, allowed_domains, user_location}: see search.go
//	tool_choice                  "auto" → {type:auto}, "required" → {type:any}, "none" →
//	                             {type:none}, {function:{name}} → {type:tool,name}; dropped,
//	                             with parallel_tool_calls, when there are no tools
//	parallel_tool_calls false    tool_choice.disable_parallel_tool_use (with type auto when
//	                             no tool_choice was given)
//	response_format              text → nothing; json_schema → output_config.format
//	                             {type:json_schema, schema} (structured outputs); json_object
//	                             → rejected, retryable
//	reasoning_effort             thinking {type:enabled, budget_tokens} (see below)
//	thinking (not OpenAI's: from thinking as sent (enabled with its exact budget_tokens,
//	/v1/messages, or a chat      adaptive, disabled), over reasoning_effort; never left
//	client's body)               off: the client chose it. Without a client limit
//	                             max_tokens is DefaultMaxTokens + budget_tokens
//	user                         metadata.user_id
//	stream                       true for Open, false for Complete; stream_options is
//	                             consumed (usage always comes, see below)
//	n > 1, logprobs,             rejected, retryable: the API has no counterpart and the
//	top_logprobs, audio          answer would not be what the client asked for
//	seed, frequency_penalty,     dropped: sampling hints with no counterpart, the answer is
//	presence_penalty,            still the one asked for; logit_bias names token ids of
//	logit_bias, service_tier,    OpenAI's tokenizers. Any other member is dropped too.
//	store, metadata, prediction,
//	modalities (text), …
//
// reasoning_effort budgets (budget_tokens; the API's minimum is 1024):
//
//	none, ""   no thinking
//	minimal    1024 (BudgetMinimal)
//	low        2048 (BudgetLow)
//	medium     8192 (BudgetMedium)
//	high       16384 (BudgetHigh); xhigh the same
//
// Budgets must be below max_tokens. Without a client limit max_tokens becomes
// DefaultMaxTokens + the budget, so the answer keeps its default room; with
// one, the budget shrinks to max_tokens − 1, and thinking is left off when
// that is below 1024. As the docs require with thinking, temperature and
// top_k are omitted and top_p is kept only from 0.95 to 1 (also with a
// thinking object). A reasoning_effort's thinking is also left off when
// tool_choice forces a tool (the API rejects forced tool use with thinking,
// and the client's code waits for the call) and when the request continues
// a tool-use turn (its last turn holds tool results): the API then wants
// the turn's signed thinking blocks back, which a chat conversation carries
// only in thinking_blocks: thinking stays on when that turn starts with
// them. A thinking object is never changed or left off. Models that accept only adaptive thinking
// (Claude 4.7 and later) reject {type:enabled} with a 400.
//
// # Stream: Messages events → OpenAI chunks
//
// Every chunk is a chat.completion.chunk with the id and model of
// message_start and a "created" taken when it arrived. Each upstream event
// gives one event from Next; an event without counterpart gives a heartbeat
// (non-nil empty Data), which keeps the relay's idle window open.
//
//	message_start                     role chunk: delta {role:assistant, content:""}; usage counts
//	content_block_start text          heartbeat (content chunk if it carries text)
//	content_block_start thinking      heartbeat (reasoning chunk if it carries thinking)
//	content_block_start tool_use      tool_calls [{index, id, type:function,
//	                                  function:{name, arguments:""}}]; index counts the
//	                                  message's tool_use blocks from 0
//	text_delta                        delta {content}
//	thinking_delta                    delta {reasoning_content}
//	signature_delta                   delta {thinking_blocks: [{type:thinking, signature}]}: the
//	                                  block's text is the reasoning_content before it
//	content_block_start               delta {thinking_blocks: [{type:redacted_thinking, data}]}
//	redacted_thinking
//	input_json_delta                  tool_calls [{index, function:{arguments: partial_json}}]
//	                                  ("" gives a heartbeat)
//	content_block_stop                heartbeat; for a tool_use block that streamed no arguments,
//	                                  arguments "{}" (its input is {})
//	citations_delta, ping,            heartbeat
//	other block types (server tools),
//	unknown event types
//	message_delta                     finish chunk (delta {}, finish_reason) at its stop_reason,
//	                                  with the choice's stop_reason the matched stop_sequence
//	                                  (vLLM's field) when there is one; usage counts
//	message_stop                      the finish chunk if none came, then a usage chunk
//	                                  (choices []), then io.EOF
//	error                             a *provider.Error (see Errors)
//
// Text, reasoning, ids, names and partial JSON are copied as the upstream's
// JSON string literals, which the scanner has validated: nothing is decoded
// or re-encoded, and a chunk is appended into one buffer the stream reuses
// (no allocation per chunk). The stream knows what each chunk it wrote
// carries and tells the relay (provider.ChunkInfoer), which then does not
// scan the chunk again. The compact content_block_delta the API sends
// for nearly every token is matched by its fixed parts first; any other
// spelling or event is read member by member; both validate every byte.
//
// An event that is not valid JSON (or nests deeper than 128, or is larger
// than Options.MaxEvent), content before message_start, or a delta for a
// block that did not start ends the stream with an error wrapping
// provider.ErrMalformed; an end before message_stop (a cut, also a clean
// EOF) with one wrapping provider.ErrTruncated.
//
// Usage: input_tokens, cache_read_input_tokens and cache_creation_input_tokens
// from message_start, output_tokens from message_delta; every count is
// cumulative and the latest wins (message_delta may restate the input
// counts). The usage chunk has prompt_tokens = input + cache read + cache
// write, completion_tokens = output, total_tokens, prompt_tokens_details
// {cached_tokens: cache read, cache_write_tokens: cache write, when > 0}, and
// completion_tokens_details {reasoning_tokens: output_tokens_details.thinking_tokens}
// when the upstream reports it. The non-stream answer's usage is the same.
//
// Finish reasons (stop_reason → finish_reason):
//
//	end_turn                         stop
//	stop_sequence                    stop, and the choice's "stop_reason" is the sequence
//	                                 (as vLLM reports the stop string that matched; OpenAI
//	                                 clients ignore it, /v1/messages clients read it back)
//	max_tokens,                      length
//	model_context_window_exceeded
//	tool_use                         tool_calls
//	refusal                          content_filter
//	pause_turn                       stop: a server-tool turn paused; OpenAI cannot ask the
//	                                 client to continue it, the answer ends there
//	unknown, or none by message_stop stop
//
// # Non-stream: Message → chat.completion
//
// Text blocks are joined into content, thinking blocks into
// reasoning_content and, with redacted_thinking blocks, into
// thinking_blocks (signatures and data kept), tool_use blocks become tool_calls (arguments: the input
// as compact JSON text); finish_reason, stop_reason and usage as for streams. Other block
// types are dropped.
//
// # Errors
//
// An error status is a *provider.Error with the status, the body's
// error.type and error.message ({"type":"error","error":{...}}), Retry-After
// parsed, and Retryable as provider.RetryableStatus says: 429, 529
// (overloaded) and every 5xx, also 401/403/404 (another route may hold a
// working key or the model); not 400, 402, 413. An "error" event in the
// stream is a *provider.Error with the status its type documents, retryable
// the same way (so the gateway falls back before content):
//
//	invalid_request_error 400   authentication_error 401   billing_error 402
//	permission_error 403        not_found_error 404        conflict_error 409
//	request_too_large 413       rate_limit_error 429       api_error 500
//	timeout_error 504           overloaded_error 529       unknown types 500
//
// A request the adapter cannot translate is a *provider.Error with Status
// 400 and Type invalid_request_error, never sent upstream: Code
// "invalid_request" and not retryable when the request itself is wrong (no
// route would serve it), Code "unsupported_parameter" and Retryable when the
// Messages API lacks the feature (an OpenAI route of the same model may
// serve it; when none does, the client gets the 400). The message names the
// field, as messages[2].tool_calls[0].function.arguments. Messages never
// hold the API key.
package anthropic
