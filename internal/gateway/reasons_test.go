package gateway

import (
	"fmt"
	"slices"
	"testing"

	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
)

// TestFallbackReasonsKnown: the reasons fallbackReason labels with and
// metrics.FallbackReasons, the set created at 0 for every model at start,
// are the same: a reason added to one and not the other fails here.
func TestFallbackReasonsKnown(t *testing.T) {
	errs := []error{
		provider.ErrFirstTokenTimeout,
		fmt.Errorf("stall: %w", provider.ErrIdleTimeout),
		&provider.Error{Retryable: true, Message: "dial upstream", Err: fmt.Errorf("%w: refused", provider.ErrConnect)},
		&provider.Error{Retryable: true, Err: provider.ErrUntranslatable},
		&provider.Error{Retryable: true, Status: 429},
		&provider.Error{Retryable: true, Status: 401},
		&provider.Error{Retryable: true, Status: 403},
		&provider.Error{Retryable: true, Status: 404},
		&provider.Error{Retryable: true, Status: 503},
		&provider.Error{Retryable: true, Status: 408},
		fmt.Errorf("cut: %w", provider.ErrTruncated),
		fmt.Errorf("bad: %w", provider.ErrMalformed),
		&relay.UpstreamError{Data: `{"error":{}}`},
	}
	seen := map[string]bool{}
	for _, err := range errs {
		r := fallbackReason(err)
		if !slices.Contains(metrics.FallbackReasons, r) {
			t.Errorf("fallbackReason(%v) = %q, not in metrics.FallbackReasons", err, r)
		}
		seen[r] = true
	}
	for _, r := range metrics.FallbackReasons {
		if !seen[r] {
			t.Errorf("metrics.FallbackReasons has %q, which no error of this test gets", r)
		}
	}
}
