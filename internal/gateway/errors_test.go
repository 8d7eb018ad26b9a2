package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/provider"
)

// An upstream's error status is mapped, and what the client reads names the
// failure without quoting the upstream, but for the request's own faults.
func TestUpstreamStatusError(t *testing.T) {
	leaky := "see https://docs.example.com/x or 10.1.2.3:8443 (key sk-abc)"
	tests := []struct {
		status     int
		code       string
		wantStatus int
		wantCode   string
		wantMsg    string // a part of the message
	}{
		{400, "invalid_value", 400, "invalid_value", "the upstream rejected the request: see [address] or [address]"},
		{422, "", 422, "upstream_422", "the upstream rejected the request"},
		{401, "invalid_api_key", 502, "upstream_auth_failed", "refused the gateway's credentials (401)"},
		{403, "", 502, "upstream_auth_failed", "refused the gateway's credentials (403)"},
		{404, "model_not_found", 502, "model_not_found", "does not serve this model"},
		{408, "", 504, "upstream_408", "the upstream failed (408)"},
		{429, "rate_limited", 429, "rate_limited", "rate limiting (429)"},
		{500, "", 502, "upstream_500", "the upstream failed (500)"},
		{503, "", 503, "upstream_503", "the upstream failed (503)"},
	}
	for _, tt := range tests {
		h := statusOf(&provider.Error{Status: tt.status, Code: tt.code, Message: leaky, RetryAfter: 3 * time.Second})
		msg, code := h.body.Error.Message, ""
		if h.body.Error.Code != nil {
			code = *h.body.Error.Code
		}
		if h.status != tt.wantStatus || code != tt.wantCode || !strings.Contains(msg, tt.wantMsg) {
			t.Errorf("upstream %d: got %d %q %q, want %d %q and a message with %q", tt.status, h.status, code, msg, tt.wantStatus, tt.wantCode, tt.wantMsg)
		}
		if strings.Contains(msg, "https://") || strings.Contains(msg, "10.1.2.3") || (tt.status != 400 && tt.status != 422 && strings.Contains(msg, "sk-abc")) {
			t.Errorf("upstream %d: message %q leaks the upstream's words", tt.status, msg)
		}
		if (h.retryAfter != 0) != (tt.status == 429) {
			t.Errorf("upstream %d: got Retry-After %v", tt.status, h.retryAfter)
		}
	}
}
