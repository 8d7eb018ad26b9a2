package cloud

import "net/http"

// For the gateway-level benchmarks (package cloud_test): the in-memory
// upstream and the Claude stream, in SSE and in Bedrock's frames, that
// this package's own tests use.
var (
	AnthropicEvents = anthropicEvents
	SSEBody         = sseBody
	FrameBody       = frameBody
)

// Canned is an upstream answering every request with body, of content
// type ct, in memory.
func Canned(body []byte, ct string) http.RoundTripper { return cannedRT{body: body, ct: ct} }
