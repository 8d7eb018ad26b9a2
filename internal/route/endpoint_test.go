package route_test

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgate/streamgate/internal/route"
)

// events records an endpoint's transitions.
type events struct {
	mu   sync.Mutex
	list []route.EventKind
}

func (e *events) notify(ev route.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev.Kind)
	e.mu.Unlock()
}

func (e *events) got() []route.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// TestEndpointShared: two models' routes on one upstream share its
// health: one route's failures eject the other, one's success heals both.
func TestEndpointShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev events
		ep := route.NewEndpoint("up", route.Health{}, ev.notify)
		a := route.OnEndpoint("up/model-a", 1, ep)
		b := route.OnEndpoint("up/model-b", 1, ep)
		eject(t, a)
		if got := b.State(); got != route.Ejected {
			t.Fatalf("the other model's route: got %v, want %v", got, route.Ejected)
		}
		if b.Begin() {
			t.Fatal("Begin on the other model's route while ejected: got true, want false")
		}
		if s := b.Snapshot(); s.Endpoint != "up" || s.Failures != 0 || s.EndpointFailures != 5 || s.ConsecutiveFailures != 5 {
			t.Fatalf("the other route's snapshot: got endpoint %q, failures %d, endpoint failures %d, consecutive %d; want up, 0, 5, 5",
				s.Endpoint, s.Failures, s.EndpointFailures, s.ConsecutiveFailures)
		}
		time.Sleep(route.DefaultWindow)
		attempt(t, b, success) // b's probe heals a too
		if got := a.State(); got != route.Healthy {
			t.Fatalf("after the other route's probe succeeded: got %v, want %v", got, route.Healthy)
		}
		want := []route.EventKind{route.EventEjected, route.EventProbing, route.EventRecovered}
		if got := ev.got(); !slices.Equal(got, want) {
			t.Fatalf("events: got %v, want %v", got, want)
		}
	})
}

// TestReadmitReset: an active check's pass and an operator's reset close
// the circuit whatever its state and clear the doubled window; on a
// healthy endpoint they do nothing and tell no event.
func TestReadmitReset(t *testing.T) {
	for _, tt := range []struct {
		name string
		fn   func(*route.Endpoint) bool
		kind route.EventKind
	}{
		{"readmit", (*route.Endpoint).Readmit, route.EventRecovered},
		{"reset", (*route.Endpoint).Reset, route.EventReset},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var ev events
				ep := route.NewEndpoint("up", route.Health{}, ev.notify)
				tg := route.OnEndpoint("up/m", 1, ep)
				if tt.fn(ep) {
					t.Fatal("on a healthy endpoint: got true, want false")
				}
				eject(t, tg)
				time.Sleep(route.DefaultWindow)
				attempt(t, tg, failure) // a failed probe: the window doubles
				if got := tg.State(); got != route.Ejected {
					t.Fatalf("after a failed probe: got %v, want %v", got, route.Ejected)
				}
				if tg.Begin() {
					t.Fatal("Begin inside the doubled window: got true, want false")
				}
				if !tt.fn(ep) {
					t.Fatal("on an ejected endpoint: got false, want true")
				}
				if got := tg.State(); got != route.Healthy || ep.ConsecutiveFailures() != 0 {
					t.Fatalf("after: got %v with %d consecutive failures, want healthy with 0", got, ep.ConsecutiveFailures())
				}
				eject(t, tg) // the first window again, not the doubled one
				if got, want := until(t, tg).Sub(time.Now()), route.DefaultWindow; got != want {
					t.Fatalf("next window: got %v, want %v", got, want)
				}
				want := []route.EventKind{route.EventEjected, route.EventProbing, route.EventEjected, tt.kind, route.EventEjected}
				if got := ev.got(); !slices.Equal(got, want) {
					t.Fatalf("events: got %v, want %v", got, want)
				}
			})
		})
	}
}

// TestPanic: with every target ejected, Panic picks the one with the
// fewest consecutive failures, then the oldest last failure; a Force on
// it is an attempt whose success closes the circuit.
func TestPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := []*route.Target{
			route.NewTarget("a/m", 1, route.Health{}),
			route.NewTarget("b/m", 1, route.Health{}),
			route.NewTarget("c/m", 1, route.Health{}),
		}
		set, err := route.NewSet(route.Fallback, ts)
		if err != nil {
			t.Fatal(err)
		}
		eject(t, ts[2])
		time.Sleep(time.Second)
		eject(t, ts[1])
		time.Sleep(time.Second)
		eject(t, ts[0])
		if set.Ready() {
			t.Fatal("Ready with every target ejected: got true, want false")
		}
		// a, b, c have 5 consecutive failures each; c's last is the oldest.
		if got := set.Panic(); got != ts[2] {
			t.Fatalf("panic pick, equal failures: got %s, want c/m (oldest last failure)", got.Name)
		}
		ts[2].Force()
		ts[2].End(failure)
		if got := set.Panic(); got != ts[1] {
			t.Fatalf("panic pick after c failed again: got %s, want b/m", got.Name)
		}
		ts[1].Force()
		if got := ts[1].Inflight(); got != 1 {
			t.Fatalf("inflight of a forced attempt: got %d, want 1", got)
		}
		ts[1].End(success)
		if got := ts[1].State(); got != route.Healthy {
			t.Fatalf("after a forced attempt succeeded: got %v, want %v", got, route.Healthy)
		}
		if got := ts[1].Inflight(); got != 0 {
			t.Fatalf("inflight: got %d, want 0", got)
		}
	})
}
