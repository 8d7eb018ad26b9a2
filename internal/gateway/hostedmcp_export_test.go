package gateway

// The hosted-MCP types, for the fakes of the tests of package gateway_test.
type (
	HostedMCP       = hostedMCP
	HostedCaller    = hostedCaller
	HostedTool      = hostedTool
	HostedResult    = hostedResult
	HostedCallError = hostedCallError
)

// SetHostedMCP makes h run the gateway's hosted MCP tools.
func (g *Gateway) SetHostedMCP(h HostedMCP) { g.hosted = h }

// HostedMaxCalls is the bound of a turn's model calls.
const HostedMaxCalls = hostedMaxCalls
