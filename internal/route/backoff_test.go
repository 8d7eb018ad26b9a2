package route_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/route"
)

func fixed(r float64) func() float64 { return func() float64 { return r } }

func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	// The default ceilings of retries 1..8: 100ms doubling, capped at 2s.
	ceilings := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms}
	for i, ceiling := range ceilings {
		n := i + 1
		if got := (route.Backoff{Rand: fixed(0)}).Delay(n, 0); got != 0 {
			t.Errorf("retry %d, draw 0: got %v, want 0", n, got)
		}
		got := route.Backoff{Rand: fixed(0.999)}.Delay(n, 0)
		if want := time.Duration(0.999 * float64(ceiling)); got != want || got >= ceiling {
			t.Errorf("retry %d, draw 0.999: got %v, want %v (below %v)", n, got, want, ceiling)
		}
	}

	tests := []struct {
		name       string
		b          route.Backoff
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"half of the first ceiling", route.Backoff{Rand: fixed(0.5)}, 1, 0, 50 * ms},
		{"retry 0 counts as 1", route.Backoff{Rand: fixed(0.5)}, 0, 0, 50 * ms},
		{"negative retry counts as 1", route.Backoff{Rand: fixed(0.5)}, -3, 0, 50 * ms},
		{"a huge retry number is capped", route.Backoff{Rand: fixed(0.5)}, 1000, 0, time.Second},
		{"Retry-After is a floor", route.Backoff{Rand: fixed(0.5)}, 1, 80 * ms, 80 * ms},
		{"Retry-After below the draw", route.Backoff{Rand: fixed(0.5)}, 3, 80 * ms, 200 * ms},
		{"Retry-After above Max", route.Backoff{Rand: fixed(0.5)}, 1, 30 * time.Second, 30 * time.Second},
		{"custom base", route.Backoff{Base: time.Second, Max: time.Minute, Rand: fixed(0.5)}, 3, 0, 2 * time.Second},
		{"custom cap", route.Backoff{Base: time.Second, Max: 3 * time.Second, Rand: fixed(0.5)}, 5, 0, 1500 * ms},
		{"base above max", route.Backoff{Base: time.Minute, Max: time.Second, Rand: fixed(0.5)}, 1, 0, 500 * ms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.n, tt.retryAfter); got != tt.want {
				t.Fatalf("Delay(%d, %v): got %v, want %v", tt.n, tt.retryAfter, got, tt.want)
			}
		})
	}
}

// TestBackoffDelayDefaultRand: without Rand the draws stay in [0, ceiling).
func TestBackoffDelayDefaultRand(t *testing.T) {
	for n := 1; n <= 8; n++ {
		ceiling := min(route.DefaultBackoffBase<<(n-1), route.DefaultBackoffMax)
		for range 1000 {
			if got := (route.Backoff{}).Delay(n, 0); got < 0 || got >= ceiling {
				t.Fatalf("retry %d: got %v, want in [0, %v)", n, got, ceiling)
			}
		}
	}
}

func TestBackoffWait(t *testing.T) {
	errCause := errors.New("total timeout")
	b := route.Backoff{Rand: fixed(0.5)} // retry 3 waits 200ms
	const wait = 200 * time.Millisecond
	tests := []struct {
		name       string
		ctx        func(context.Context) (context.Context, context.CancelFunc)
		retryAfter time.Duration
		deadline   time.Duration // from the start; 0 none
		want       error
		elapsed    time.Duration
	}{
		{"sleeps the delay", nil, 0, 0, nil, wait},
		{"deadline after the wait", nil, 0, time.Second, nil, wait},
		{"deadline at the end of the wait", nil, 0, wait, nil, wait},
		{"deadline too close", nil, 0, wait - time.Nanosecond, route.ErrBudget, 0},
		{"Retry-After past the deadline", nil, 5 * time.Second, time.Second, route.ErrBudget, 0},
		{"Retry-After honoured", nil, time.Second, 0, nil, time.Second},
		{"already cancelled", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(ctx)
			cancel(errCause)
			return ctx, func() {}
		}, 0, 0, errCause, 0},
		{"cancelled while waiting", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(ctx, 50*time.Millisecond, errCause)
		}, 0, 0, errCause, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				if tt.ctx != nil {
					var cancel context.CancelFunc
					ctx, cancel = tt.ctx(ctx)
					defer cancel()
				}
				start := time.Now()
				var deadline time.Time
				if tt.deadline > 0 {
					deadline = start.Add(tt.deadline)
				}
				err := b.Wait(ctx, 3, tt.retryAfter, deadline)
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
					t.Fatalf("got error %v, want %v", err, tt.want)
				}
				if got := time.Since(start); got != tt.elapsed {
					t.Fatalf("waited %v, want %v", got, tt.elapsed)
				}
			})
		})
	}
}
