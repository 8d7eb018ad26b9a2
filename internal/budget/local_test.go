package budget

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// synctest's clock starts at 2000-01-01 00:00:00 UTC: the start of a month
// and of a day.

func date(y int, m time.Month, d, h, min, s, ns int) time.Time {
	return time.Date(y, m, d, h, min, s, ns, time.UTC)
}

func TestWindow(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	tests := []struct {
		name               string
		period             string
		now                time.Time
		wantStart, wantEnd time.Time
	}{
		{"month middle", Month, date(2026, 11, 15, 12, 0, 0, 0), date(2026, 11, 1, 0, 0, 0, 0), date(2026, 12, 1, 0, 0, 0, 0)},
		{"month first instant", Month, date(2026, 12, 1, 0, 0, 0, 0), date(2026, 12, 1, 0, 0, 0, 0), date(2027, 1, 1, 0, 0, 0, 0)},
		{"month last ns", Month, date(2026, 11, 30, 23, 59, 59, 999_999_999), date(2026, 11, 1, 0, 0, 0, 0), date(2026, 12, 1, 0, 0, 0, 0)},
		{"month december to january", Month, date(2026, 12, 31, 23, 0, 0, 0), date(2026, 12, 1, 0, 0, 0, 0), date(2027, 1, 1, 0, 0, 0, 0)},
		{"month leap february", Month, date(2028, 2, 29, 1, 0, 0, 0), date(2028, 2, 1, 0, 0, 0, 0), date(2028, 3, 1, 0, 0, 0, 0)},
		// 19:30 EST on Nov 30 is 00:30 UTC on Dec 1: calendar UTC.
		{"month in UTC not local", Month, time.Date(2026, 11, 30, 19, 30, 0, 0, est), date(2026, 12, 1, 0, 0, 0, 0), date(2027, 1, 1, 0, 0, 0, 0)},
		{"day middle", Day, date(2026, 11, 30, 19, 29, 0, 0), date(2026, 11, 30, 0, 0, 0, 0), date(2026, 12, 1, 0, 0, 0, 0)},
		{"day first instant", Day, date(2026, 12, 1, 0, 0, 0, 0), date(2026, 12, 1, 0, 0, 0, 0), date(2026, 12, 2, 0, 0, 0, 0)},
		{"day last ns", Day, date(2026, 12, 31, 23, 59, 59, 999_999_999), date(2026, 12, 31, 0, 0, 0, 0), date(2027, 1, 1, 0, 0, 0, 0)},
		{"day in UTC not local", Day, time.Date(2026, 11, 30, 19, 30, 0, 0, est), date(2026, 12, 1, 0, 0, 0, 0), date(2026, 12, 2, 0, 0, 0, 0)},
		{"total", Total, date(2026, 11, 30, 19, 29, 0, 0), time.Time{}, time.Time{}},
		{"unknown", "week", date(2026, 11, 30, 19, 29, 0, 0), time.Time{}, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, end := Window(tt.period, tt.now)
			if !start.Equal(tt.wantStart) || !end.Equal(tt.wantEnd) {
				t.Fatalf("Window(%q, %v): got %v, %v, want %v, %v", tt.period, tt.now, start, end, tt.wantStart, tt.wantEnd)
			}
			if start.Location() != time.UTC || end.Location() != time.UTC {
				t.Fatalf("Window(%q, %v): got locations %v, %v, want UTC", tt.period, tt.now, start.Location(), end.Location())
			}
		})
	}
}

func TestExceededError(t *testing.T) {
	tests := []struct {
		e    Exceeded
		want string
	}{
		{Exceeded{Key: "team-a", Limit: Limit{50, Month}, Spent: 50.13, Reset: date(2026, 12, 1, 0, 0, 0, 0)},
			"budget of $50.00 per month spent ($50.13 used); it resets at 2026-12-01T00:00:00Z"},
		{Exceeded{Key: "team-a", Limit: Limit{2.5, Day}, Spent: 2.5, Reset: date(2026, 12, 1, 0, 0, 0, 0)},
			"budget of $2.50 per day spent ($2.50 used); it resets at 2026-12-01T00:00:00Z"},
		{Exceeded{Key: "team-a", Limit: Limit{100, Total}, Spent: 100.004},
			"budget of $100.00 in total spent ($100.00 used)"},
		// Below a cent, digits enough to be true (issue 25: "$0.00 … ($0.00 used)").
		{Exceeded{Key: "k", Limit: Limit{0.002, Day}, Spent: 0.0021337, Reset: date(2026, 12, 1, 0, 0, 0, 0)},
			"budget of $0.002 per day spent ($0.00213 used); it resets at 2026-12-01T00:00:00Z"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

// committed returns key's settled and reserved micro-dollars.
func committed(l *Local, key string) (settled, reserved int64) {
	e := l.shard(key).entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.settled, e.reserved
}

// fixedSpent returns a SpentFunc answering usd and counting its calls.
func fixedSpent(usd float64, calls *atomic.Int64) SpentFunc {
	return func(context.Context, string, time.Time) (float64, error) {
		calls.Add(1)
		return usd, nil
	}
}

func TestLocalReserveSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		l := NewLocal(fixedSpent(0.40, &calls))
		lim := Limit{USD: 1, Period: Month}
		ctx := t.Context()
		step := func(name string, wantSettled, wantReserved int64) {
			t.Helper()
			if s, r := committed(l, "k"); s != wantSettled || r != wantReserved {
				t.Fatalf("%s: got settled %d, reserved %d µ$, want %d, %d", name, s, r, wantSettled, wantReserved)
			}
		}
		a, err := l.Reserve(ctx, "k", lim, 0.30)
		if err != nil {
			t.Fatalf("a: got %v, want allowed", err)
		}
		step("after a", 400_000, 300_000)
		// 0.70 < 1: allowed although 0.70 + 0.50 > 1 (the estimate is not
		// checked); it holds what is left, 0.30.
		b, err := l.Reserve(ctx, "k", lim, 0.50)
		if err != nil {
			t.Fatalf("b: got %v, want allowed", err)
		}
		step("after b", 400_000, 600_000)
		_, err = l.Reserve(ctx, "k", lim, 0.01)
		var ex *Exceeded
		if !errors.As(err, &ex) || ex.Spent != 1 {
			t.Fatalf("c at 1.00 committed: got %v, want *Exceeded with Spent 1.00", err)
		}
		a.Settle(ctx, 0.10)
		step("a settled", 500_000, 300_000)
		a.Settle(ctx, 5) // no-op
		step("a settled twice", 500_000, 300_000)
		d, err := l.Reserve(ctx, "k", lim, 0.25)
		if err != nil {
			t.Fatalf("d at 0.80: got %v, want allowed", err)
		}
		step("after d (holds the 0.20 left)", 500_000, 500_000)
		if _, err := l.Reserve(ctx, "k", lim, 0); err == nil {
			t.Fatal("e at exactly 1.00 committed: got allowed, want refused")
		}
		b.Settle(ctx, 0.60) // more than its estimate
		step("b settled", 1_100_000, 200_000)
		d.Settle(ctx, -3) // counts as 0
		step("d settled negative", 1_100_000, 0)
		if _, err := l.Reserve(ctx, "k", lim, 0); err == nil {
			t.Fatal("e at 1.10 settled: got allowed, want refused")
		}
		if n := calls.Load(); n != 1 {
			t.Fatalf("SpentFunc calls: got %d, want 1", n)
		}
	})
}

// TestLocalMicroDollars checks that sums are exact: ten settles of $0.10
// spend a $1.00 budget exactly (in float64, 0.1·10 < 1).
func TestLocalMicroDollars(t *testing.T) {
	l := NewLocal(nil)
	lim := Limit{USD: 1, Period: Total}
	for i := range 10 {
		r, err := l.Reserve(t.Context(), "k", lim, 0.1)
		if err != nil {
			t.Fatalf("request %d: got %v, want allowed", i+1, err)
		}
		r.Settle(t.Context(), 0.1)
	}
	if _, err := l.Reserve(t.Context(), "k", lim, 0.1); err == nil {
		t.Fatal("11th: got allowed, want refused at exactly $1.00")
	}
}

func TestLocalRefusal(t *testing.T) {
	tests := []struct {
		period    string
		wantReset time.Time
		wantMsg   string
	}{
		{Month, date(2000, 2, 1, 0, 0, 0, 0), "budget of $10.00 per month spent ($10.50 used); it resets at 2000-02-01T00:00:00Z"},
		{Day, date(2000, 1, 2, 0, 0, 0, 0), "budget of $10.00 per day spent ($10.50 used); it resets at 2000-01-02T00:00:00Z"},
		{Total, time.Time{}, "budget of $10.00 in total spent ($10.50 used)"},
	}
	for _, tt := range tests {
		t.Run(tt.period, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var since []time.Time
				l := NewLocal(func(_ context.Context, key string, s time.Time) (float64, error) {
					since = append(since, s)
					if len(since) == 1 {
						return 10.50, nil
					}
					return 0, nil
				})
				time.Sleep(7 * time.Hour) // into the window
				lim := Limit{USD: 10, Period: tt.period}
				_, err := l.Reserve(t.Context(), "team-a", lim, 0.01)
				var ex *Exceeded
				if !errors.As(err, &ex) {
					t.Fatalf("got %v, want *Exceeded", err)
				}
				want := Exceeded{Key: "team-a", Limit: lim, Spent: 10.50, Reset: tt.wantReset}
				if *ex != want {
					t.Fatalf("got %+v, want %+v", *ex, want)
				}
				if err.Error() != tt.wantMsg {
					t.Fatalf("message: got %q, want %q", err.Error(), tt.wantMsg)
				}
				if tt.wantReset.IsZero() {
					return
				}
				time.Sleep(time.Until(tt.wantReset) - time.Nanosecond)
				if _, err := l.Reserve(t.Context(), "team-a", lim, 0.01); err == nil {
					t.Fatal("1 ns before the reset: got allowed, want refused")
				}
				time.Sleep(time.Nanosecond)
				if _, err := l.Reserve(t.Context(), "team-a", lim, 0.01); err != nil {
					t.Fatalf("at the reset: got %v, want allowed", err)
				}
				if len(since) != 2 || !since[0].Equal(date(2000, 1, 1, 0, 0, 0, 0)) || !since[1].Equal(tt.wantReset) {
					t.Fatalf("loads since: got %v, want [2000-01-01, %v]", since, tt.wantReset)
				}
			})
		})
	}
}

// TestLocalLoadOncePerWindow checks that the spend is loaded once per key and
// window, that a new window starts from a fresh load, that a reservation of
// the old window does not count in the new one, and that a failed load is
// retried.
func TestLocalLoadOncePerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loads := map[string]int{}
		var fail bool
		l := NewLocal(func(_ context.Context, key string, since time.Time) (float64, error) {
			if fail {
				return 0, errors.New("db down")
			}
			loads[key+"@"+since.Format(time.DateOnly)]++
			return 1, nil
		})
		lim := Limit{USD: 5, Period: Day}
		var old *Reservation
		for i := range 10 {
			r, err := l.Reserve(t.Context(), "a", lim, 0.2)
			if err != nil {
				t.Fatalf("a %d: %v", i, err)
			}
			if i == 0 {
				old = r
				continue
			}
			r.Settle(t.Context(), 0.1)
		}
		l.Reserve(t.Context(), "b", lim, 0)
		if s, r := committed(l, "a"); s != 1_900_000 || r != 200_000 {
			t.Fatalf("a: got settled %d, reserved %d, want 1900000, 200000", s, r)
		}
		time.Sleep(24 * time.Hour) // the next day
		fail = true
		if _, err := l.Reserve(t.Context(), "a", lim, 0.2); err == nil || !strings.Contains(err.Error(), "db down") || !strings.Contains(err.Error(), `"a"`) {
			t.Fatalf("failed load: got %v, want the SpentFunc's error naming the key", err)
		}
		fail = false
		if _, err := l.Reserve(t.Context(), "a", lim, 0.2); err != nil {
			t.Fatalf("after the failed load: got %v, want allowed", err)
		}
		old.Settle(t.Context(), 3) // of yesterday: not counted today
		if s, r := committed(l, "a"); s != 1_000_000 || r != 200_000 {
			t.Fatalf("a the next day: got settled %d, reserved %d, want 1000000, 200000", s, r)
		}
		want := map[string]int{"a@2000-01-01": 1, "b@2000-01-01": 1, "a@2000-01-02": 1}
		if len(loads) != len(want) {
			t.Fatalf("loads: got %v, want %v", loads, want)
		}
		for k, n := range want {
			if loads[k] != n {
				t.Fatalf("loads: got %v, want %v", loads, want)
			}
		}
	})
}

// TestLocalConcurrent: 100 goroutines reserve $0.01 against $0.50, none
// settles: exactly 50 allowed, and the spend loaded once.
func TestLocalConcurrent(t *testing.T) {
	var calls atomic.Int64
	l := NewLocal(func(context.Context, string, time.Time) (float64, error) {
		calls.Add(1)
		time.Sleep(time.Millisecond) // the others wait for this load
		return 0, nil
	})
	lim := Limit{USD: 0.5, Period: Month}
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			_, err := l.Reserve(context.Background(), "shared", lim, 0.01)
			var ex *Exceeded
			switch {
			case err == nil:
				allowed.Add(1)
			case errors.As(err, &ex):
				refused.Add(1)
			default:
				t.Errorf("Reserve: %v", err)
			}
		})
	}
	wg.Wait()
	if a, r := allowed.Load(), refused.Load(); a != 50 || r != 50 {
		t.Fatalf("got %d allowed, %d refused, want 50, 50", a, r)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("SpentFunc calls: got %d, want 1", n)
	}
}

// TestLocalConcurrentSettle checks the documented bound with settles racing
// reserves: 100 goroutines, each with at most one request in flight, estimate
// $0.01, actual $0.02, budget $1. At the last admission at most 99 others are
// in flight, so spend < $1 + $0.02 + 99·($0.02 − $0.01) = $2.01.
func TestLocalConcurrentSettle(t *testing.T) {
	l := NewLocal(nil)
	lim := Limit{USD: 1, Period: Month}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for range 20 {
				r, err := l.Reserve(context.Background(), "k", lim, 0.01)
				if err != nil {
					return
				}
				r.Settle(context.Background(), 0.02)
			}
		})
	}
	wg.Wait()
	s, r := committed(l, "k")
	if r != 0 {
		t.Fatalf("reserved after all settled: got %d µ$, want 0", r)
	}
	if s < 1_000_000 || s >= 2_010_000 {
		t.Fatalf("spent: got %d µ$, want in [1000000, 2010000)", s)
	}
	t.Logf("spent $%.2f of a $1 budget", float64(s)/1e6)
}

func TestLocalNoBudget(t *testing.T) {
	var calls atomic.Int64
	l := NewLocal(fixedSpent(100, &calls))
	for _, lim := range []Limit{{}, {USD: -1, Period: Month}, {USD: 0, Period: "bogus"}} {
		r, err := l.Reserve(t.Context(), "k", lim, 1)
		if r != nil || err != nil {
			t.Fatalf("%+v: got %v, %v, want nil, nil", lim, r, err)
		}
		r.Settle(t.Context(), 1) // nil: no-op
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("SpentFunc calls without a budget: got %d, want 0", n)
	}
	if _, err := l.Reserve(t.Context(), "k", Limit{USD: 1, Period: "week"}, 1); err == nil || !strings.Contains(err.Error(), `unknown period "week"`) {
		t.Fatalf("period week: got %v, want an unknown period error", err)
	}
	// A budget removed and set again starts from a fresh load.
	l.Reserve(t.Context(), "k", Limit{USD: 1000, Period: Month}, 1)
	l.Reserve(t.Context(), "k", Limit{}, 1)
	l.Reserve(t.Context(), "k", Limit{USD: 1000, Period: Month}, 1)
	if n := calls.Load(); n != 2 {
		t.Fatalf("SpentFunc calls after the budget was removed and set again: got %d, want 2", n)
	}
}

func BenchmarkLocalReserveSettle(b *testing.B) {
	l := NewLocal(nil)
	ctx := context.Background()
	lim := Limit{USD: 1e9, Period: Month}
	b.ReportAllocs()
	for b.Loop() {
		r, err := l.Reserve(ctx, "key", lim, 0.001)
		if err != nil {
			b.Fatal(err)
		}
		r.Settle(ctx, 0)
	}
}

func BenchmarkLocalReserveSettleParallel(b *testing.B) {
	l := NewLocal(nil)
	ctx := context.Background()
	lim := Limit{USD: 1e9, Period: Month}
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := keys[int(n.Add(1))%len(keys)]
		for pb.Next() {
			r, _ := l.Reserve(ctx, key, lim, 0.001)
			r.Settle(ctx, 0)
		}
	})
}

// capMicro is the largest cost, estimate or budget counted: $1e9 in µ$.
const capMicro = 1_000_000_000_000_000

// TestLocalExtremes: estimates and costs at the extremes count as $0 (NaN,
// negative, below half a micro-dollar) or as the $1e9 cap (+Inf, the largest
// float64); a request holds at most what is left of the budget ($1), and
// after the settle the key's spend is exactly the actual cost.
func TestLocalExtremes(t *testing.T) {
	tests := []struct {
		name        string
		est, actual float64
		wantHeld    int64
		wantSettled int64
	}{
		{"+Inf", math.Inf(1), math.Inf(1), 1_000_000, capMicro},
		{"MaxFloat64", math.MaxFloat64, math.MaxFloat64, 1_000_000, capMicro},
		{"NaN", math.NaN(), math.NaN(), 0, 0},
		{"-Inf", math.Inf(-1), math.Inf(-1), 0, 0},
		{"-MaxFloat64", -math.MaxFloat64, -math.MaxFloat64, 0, 0},
		{"smallest positive", math.SmallestNonzeroFloat64, 4e-7, 0, 0},
		{"estimate +Inf, actual a cent", math.Inf(1), 0.01, 1_000_000, 10_000},
		{"estimate $0.40, actual $0.40", 0.40, 0.40, 400_000, 400_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLocal(nil)
			res, err := l.Reserve(t.Context(), "k", Limit{USD: 1, Period: Month}, tt.est)
			if err != nil {
				t.Fatalf("got %v, want allowed (the estimate alone never refuses)", err)
			}
			if s, r := committed(l, "k"); s != 0 || r != tt.wantHeld {
				t.Fatalf("reserved: got settled %d, reserved %d µ$, want 0, %d", s, r, tt.wantHeld)
			}
			res.Settle(t.Context(), tt.actual)
			if s, r := committed(l, "k"); s != tt.wantSettled || r != 0 {
				t.Fatalf("settled: got settled %d, reserved %d µ$, want %d, 0", s, r, tt.wantSettled)
			}
		})
	}
}

// TestLocalManyMaxEstimates: 10,000 requests of one key reserve the largest
// estimate at once against the largest budget: the first one's hold reaches
// the budget, so exactly one is allowed; after its settle the key's spend is
// exactly its actual cost.
func TestLocalManyMaxEstimates(t *testing.T) {
	l := NewLocal(nil)
	lim := Limit{USD: math.MaxFloat64, Period: Month}
	var allowed []*Reservation
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 10_000 {
		wg.Go(func() {
			res, err := l.Reserve(context.Background(), "k", lim, math.Inf(1))
			var ex *Exceeded
			switch {
			case err == nil:
				mu.Lock()
				allowed = append(allowed, res)
				mu.Unlock()
			case !errors.As(err, &ex) || ex.Spent != capMicro/1e6:
				t.Errorf("got %v, want allowed or *Exceeded with Spent 1e9", err)
			}
		})
	}
	wg.Wait()
	if len(allowed) != 1 {
		t.Fatalf("allowed %d of 10000, want 1", len(allowed))
	}
	allowed[0].Settle(context.Background(), 0.25)
	if s, r := committed(l, "k"); s != 250_000 || r != 0 {
		t.Fatalf("got settled %d, reserved %d µ$, want 250000, 0", s, r)
	}
}

// TestLocalManyMaxCosts: 10,000 requests in flight at once (estimate 0) on
// the largest budget each cost the most that is counted. 10,000 × $1e9 in µ$
// is past MaxInt64: the spend must saturate, not wrap to a negative that
// frees the key.
func TestLocalManyMaxCosts(t *testing.T) {
	l := NewLocal(nil)
	lim := Limit{USD: math.MaxFloat64, Period: Month}
	held := make([]*Reservation, 10_000)
	for i := range held {
		res, err := l.Reserve(context.Background(), "k", lim, 0)
		if err != nil {
			t.Fatalf("request %d: got %v, want allowed", i+1, err)
		}
		held[i] = res
	}
	var wg sync.WaitGroup
	for _, res := range held {
		wg.Go(func() { res.Settle(context.Background(), math.Inf(1)) })
	}
	wg.Wait()
	if s, r := committed(l, "k"); s < capMicro || r != 0 {
		t.Fatalf("got settled %d, reserved %d µ$, want at least %d, 0", s, r, int64(capMicro))
	}
	_, err := l.Reserve(context.Background(), "k", lim, 0)
	var ex *Exceeded
	if !errors.As(err, &ex) || !(ex.Spent >= capMicro/1e6) {
		t.Fatalf("after $1e13 of costs: got %v, want *Exceeded with Spent at least 1e9", err)
	}
}
