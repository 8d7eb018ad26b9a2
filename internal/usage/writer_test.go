package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

// memStore is an in-memory Inserter for writer tests that need fake time
// (synctest) or injected failures without a database.
type memStore struct {
	mu        sync.Mutex
	byID      map[string]Entry
	requests  []string    // RequestIDs in the order stored
	batches   []int       // sizes of successful inserts
	attempts  []time.Time // time of every Insert call
	failFirst int         // the first failFirst calls fail
	fail      bool        // every call fails
	called    chan struct{}
}

func newMemStore() *memStore {
	return &memStore{byID: map[string]Entry{}, called: make(chan struct{}, 1000)}
}

func (m *memStore) Insert(ctx context.Context, entries []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts = append(m.attempts, time.Now())
	select {
	case m.called <- struct{}{}:
	default:
	}
	if m.fail || len(m.attempts) <= m.failFirst {
		return errors.New("memstore: injected failure")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, e := range entries {
		if e.ID == "" {
			return errors.New("memstore: entry without ID")
		}
		m.byID[e.ID] = e
		m.requests = append(m.requests, e.RequestID)
	}
	m.batches = append(m.batches, len(entries))
	return nil
}

func (m *memStore) stored() (n int, batches []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID), append([]int(nil), m.batches...)
}

// setFail takes the store down (true) or back up.
func (m *memStore) setFail(fail bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = fail
}

// storedRequests returns the RequestIDs stored, in the order stored.
func (m *memStore) storedRequests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.requests...)
}

// flaky fails the first failures calls of Insert, then passes them on.
type flaky struct {
	Inserter
	mu       sync.Mutex
	calls    int
	failures int
}

func (f *flaky) Insert(ctx context.Context, entries []Entry) error {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.failures
	f.mu.Unlock()
	if fail {
		return errors.New("flaky: injected failure")
	}
	return f.Inserter.Insert(ctx, entries)
}

// startWriter runs w in a goroutine; the returned func waits for Run to end
// and reports its error.
func startWriter(t *testing.T, ctx context.Context, w *Writer) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: got %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return")
		}
	}
}

func TestWriterConcurrentRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		// A small buffer so that bursts also go through the overflow list.
		w := NewWriter(s, WriterOptions{BatchSize: 64, Buffer: 16, Logger: quiet})
		wait := startWriter(t, ctx, w)
		const goroutines, each = 16, 100
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					w.Record(Entry{RequestID: fmt.Sprintf("g%d-%d", g, i), Model: "m", Outcome: OutcomeOK, OutputTokens: 1})
				}
			})
		}
		wg.Wait()
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
		const n = goroutines * each
		got, err := s.List(ctx, Filter{})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(got) != n {
			t.Fatalf("stored entries: got %d, want %d", len(got), n)
		}
		seen := make(map[string]bool, n)
		for _, e := range got {
			if seen[e.RequestID] {
				t.Fatalf("request %s stored twice", e.RequestID)
			}
			seen[e.RequestID] = true
			if e.Time.IsZero() {
				t.Fatalf("request %s: got zero Time, want the time of Record", e.RequestID)
			}
		}
		st := w.Stats()
		if st.Recorded != n || st.Written != n || st.Pending != 0 || st.Dropped != 0 {
			t.Errorf("Stats: got %+v, want Recorded=Written=%d, Pending=0, Dropped=0", st, n)
		}
	})
}

func TestWriterRetriesFailedInserts(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := testCtx(t)
		const failures = 3
		f := &flaky{Inserter: s, failures: failures}
		w := NewWriter(f, WriterOptions{BatchSize: 32, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, Logger: quiet})
		wait := startWriter(t, ctx, w)
		const n = 100
		for i := range n {
			w.Record(Entry{RequestID: strconv.Itoa(i)})
		}
		if err := w.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
		if got, err := s.Count(ctx, Filter{}); err != nil || got != n {
			t.Errorf("stored entries: got %d, %v; want %d, nil", got, err, n)
		}
		if st := w.Stats(); st.FailedInserts != failures || st.Written != n {
			t.Errorf("Stats: got FailedInserts=%d Written=%d, want %d and %d", st.FailedInserts, st.Written, failures, n)
		}
	})
}

func TestWriterCloseReportsUnwritten(t *testing.T) {
	t.Run("cancelled context, then a second Close", func(t *testing.T) {
		m := newMemStore()
		w := NewWriter(m, WriterOptions{Logger: quiet})
		for range 10 {
			w.Record(Entry{})
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := w.Close(ctx)
		if err == nil || !strings.Contains(err.Error(), "10 ledger entries not written") || !errors.Is(err, context.Canceled) {
			t.Fatalf("Close(cancelled): got %v, want an error counting 10 unwritten entries and wrapping context.Canceled", err)
		}
		if n, _ := m.stored(); n != 0 {
			t.Errorf("stored after cancelled Close: got %d, want 0", n)
		}
		// Nothing was lost: a second Close with time to spare writes it all.
		if err := w.Close(testCtx(t)); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if n, _ := m.stored(); n != 10 {
			t.Errorf("stored after second Close: got %d, want 10", n)
		}
	})
	t.Run("store down while Run retries", func(t *testing.T) {
		m := newMemStore()
		m.fail = true
		w := NewWriter(m, WriterOptions{BatchSize: 4, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, Logger: quiet})
		wait := startWriter(t, testCtx(t), w)
		for range 10 {
			w.Record(Entry{})
		}
		for range 3 { // let Run fail a few times
			select {
			case <-m.called:
			case <-time.After(10 * time.Second):
				t.Fatal("store was never called")
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-m.called // give up once the store was called again (by Run or Close)
			cancel()
		}()
		err := w.Close(ctx)
		wait()
		if err == nil || !strings.Contains(err.Error(), "10 ledger entries not written") ||
			!strings.Contains(err.Error(), "injected failure") || !errors.Is(err, context.Canceled) {
			t.Fatalf("Close: got %v, want an error counting 10 unwritten entries, naming the last insert error and wrapping context.Canceled", err)
		}
	})
}

func TestWriterFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStore()
		w := NewWriter(m, WriterOptions{FlushInterval: 200 * time.Millisecond, Logger: quiet})
		wait := startWriter(t, t.Context(), w)
		for range 3 {
			w.Record(Entry{})
		}
		time.Sleep(199 * time.Millisecond)
		synctest.Wait()
		if n, _ := m.stored(); n != 0 {
			t.Errorf("stored before the flush interval: got %d, want 0", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n, batches := m.stored(); n != 3 || !reflect.DeepEqual(batches, []int{3}) {
			t.Errorf("stored at the flush interval: got %d in batches %v, want 3 in [3]", n, batches)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
	})
}

func TestWriterBatchSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStore()
		w := NewWriter(m, WriterOptions{BatchSize: 10, Logger: quiet})
		wait := startWriter(t, t.Context(), w)
		for range 25 {
			w.Record(Entry{})
		}
		synctest.Wait() // no time passes: only full batches are written
		if _, batches := m.stored(); !reflect.DeepEqual(batches, []int{10, 10}) {
			t.Errorf("batches before the flush interval: got %v, want [10 10]", batches)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if _, batches := m.stored(); !reflect.DeepEqual(batches, []int{10, 10, 5}) {
			t.Errorf("batches after the flush interval: got %v, want [10 10 5]", batches)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
	})
}

func TestWriterBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStore()
		m.failFirst = 5
		w := NewWriter(m, WriterOptions{MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, Logger: quiet})
		wait := startWriter(t, t.Context(), w)
		w.Record(Entry{})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		m.mu.Lock()
		var gaps []time.Duration
		for i := 1; i < len(m.attempts); i++ {
			gaps = append(gaps, m.attempts[i].Sub(m.attempts[i-1]))
		}
		m.mu.Unlock()
		ms := time.Millisecond
		if want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 400 * ms, 400 * ms}; !reflect.DeepEqual(gaps, want) {
			t.Errorf("gaps between attempts: got %v, want %v", gaps, want)
		}
		if n, _ := m.stored(); n != 1 {
			t.Errorf("stored: got %d, want 1", n)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
	})
}

func TestWriterOverflowKeepsEverything(t *testing.T) {
	m := newMemStore()
	w := NewWriter(m, WriterOptions{Buffer: 4, BatchSize: 7, Logger: quiet})
	for range 100 { // no Run: the channel fills after 4
		w.Record(Entry{})
	}
	if st := w.Stats(); st.Overflowed != 96 || st.Pending != 100 {
		t.Errorf("Stats before Close: got Overflowed=%d Pending=%d, want 96 and 100", st.Overflowed, st.Pending)
	}
	if err := w.Close(testCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	n, batches := m.stored()
	if n != 100 {
		t.Errorf("stored: got %d, want 100", n)
	}
	for _, b := range batches {
		if b > 7 {
			t.Errorf("batch of %d entries, want at most BatchSize 7", b)
		}
	}
}

func TestWriterAfterClose(t *testing.T) {
	m := newMemStore()
	w := NewWriter(m, WriterOptions{Logger: quiet})
	if err := w.Close(testCtx(t)); err != nil {
		t.Fatalf("Close of an empty writer: %v", err)
	}
	w.Record(Entry{})
	if st := w.Stats(); st.Dropped != 1 || st.Recorded != 0 || st.Pending != 0 {
		t.Errorf("Stats after a Record after Close: got %+v, want Dropped=1 Recorded=0 Pending=0", st)
	}
	if err := w.Run(testCtx(t)); err != nil {
		t.Errorf("Run after Close: got %v, want nil at once", err)
	}
}

func TestWriterRunTwiceAndContextStop(t *testing.T) {
	m := newMemStore()
	w := NewWriter(m, WriterOptions{Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil { // returns at once: ctx is done
		t.Fatalf("Run with a done context: got %v, want nil", err)
	}
	if err := w.Run(testCtx(t)); err == nil {
		t.Fatal("second Run: got nil, want an error")
	}
	// Entries recorded after Run stopped wait for Close.
	w.Record(Entry{})
	if err := w.Close(testCtx(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n, _ := m.stored(); n != 1 {
		t.Errorf("stored: got %d, want 1", n)
	}
}

// TestWriterMaxPending takes the store down, records MaxPending+extra
// entries, and checks the cap: the first MaxPending are kept, the extra ones
// dropped and counted, and once the store is back the kept ones are all
// stored, in the order recorded, and Record accepts entries again.
func TestWriterMaxPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStore()
		m.fail = true
		const maxPending, extra = 50, 7
		w := NewWriter(m, WriterOptions{
			Buffer: 4, BatchSize: 8, MaxPending: maxPending,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Logger: quiet,
		})
		wait := startWriter(t, t.Context(), w)
		// Let Run take the first entry and fail on it: it waits in its
		// backoff while the rest fill the channel and the overflow list.
		w.Record(Entry{RequestID: "0"})
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		for i := 1; i < maxPending+extra; i++ {
			w.Record(Entry{RequestID: strconv.Itoa(i)})
		}
		want := Stats{Recorded: maxPending, Pending: maxPending, Overflowed: maxPending - 1 - 4, FailedInserts: 1, DroppedFull: extra}
		if st := w.Stats(); st != want {
			t.Fatalf("Stats with the store down: got %+v, want %+v", st, want)
		}

		time.Sleep(10 * time.Second) // the outage goes on: retries, nothing lost
		synctest.Wait()
		if st := w.Stats(); st.Recorded != maxPending || st.Written != 0 || st.DroppedFull != extra || st.FailedInserts < 5 {
			t.Fatalf("Stats after 10s down: got %+v, want Recorded=%d Written=0 DroppedFull=%d and at least 5 FailedInserts", st, maxPending, extra)
		}

		m.setFail(false)
		time.Sleep(time.Second) // MaxBackoff: the next retry succeeds
		synctest.Wait()
		wantIDs := make([]string, maxPending)
		for i := range wantIDs {
			wantIDs[i] = strconv.Itoa(i)
		}
		if got := m.storedRequests(); !reflect.DeepEqual(got, wantIDs) {
			t.Fatalf("stored once the store is back: got %v, want %v", got, wantIDs)
		}
		w.Record(Entry{RequestID: "after"}) // below the cap again: accepted
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
		if got := m.storedRequests(); len(got) != maxPending+1 || got[maxPending] != "after" {
			t.Errorf("stored after Close: got %v, want the %d kept entries then after", got, maxPending)
		}
		if st := w.Stats(); st.Recorded != maxPending+1 || st.Written != maxPending+1 || st.Pending != 0 || st.DroppedFull != extra || st.Dropped != 0 {
			t.Errorf("Stats after Close: got %+v, want Recorded=Written=%d Pending=0 DroppedFull=%d Dropped=0", st, maxPending+1, extra)
		}
	})
}

// TestWriterMaxPendingConcurrent records from many goroutines at once into a
// Writer whose store is down: exactly MaxPending entries are accepted however
// the Records race, and exactly those are stored once the store is back.
func TestWriterMaxPendingConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStore()
		m.fail = true
		const maxPending, goroutines, each = 500, 16, 100
		w := NewWriter(m, WriterOptions{Buffer: 16, BatchSize: 64, MaxPending: maxPending, Logger: quiet})
		wait := startWriter(t, t.Context(), w)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					w.Record(Entry{RequestID: fmt.Sprintf("g%d-%d", g, i)})
				}
			})
		}
		wg.Wait()
		if st := w.Stats(); st.Recorded != maxPending || st.DroppedFull != goroutines*each-maxPending || st.Written != 0 {
			t.Fatalf("Stats with the store down: got %+v, want Recorded=%d DroppedFull=%d Written=0", st, maxPending, goroutines*each-maxPending)
		}
		m.setFail(false)
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
		if n, _ := m.stored(); n != maxPending {
			t.Errorf("stored: got %d, want %d", n, maxPending)
		}
	})
}

// TestWriterReleasesBacklog checks that the arrays of a backlog (hundreds of
// MB after a long outage at the default MaxPending) are given back once it is
// written, instead of being kept for the Writer's lifetime.
func TestWriterReleasesBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMemStore()
		m.fail = true
		const n, buffer, batch = 10_000, 4, 8
		w := NewWriter(m, WriterOptions{Buffer: buffer, BatchSize: batch, MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Logger: quiet})
		wait := startWriter(t, t.Context(), w)
		for range n {
			w.Record(Entry{})
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		m.setFail(false)
		time.Sleep(5 * time.Second) // the store is back: Run writes the backlog, then idles
		synctest.Wait()
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wait()
		if got, _ := m.stored(); got != n {
			t.Fatalf("stored: got %d, want %d", got, n)
		}
		if limit := 4 * max(buffer, batch); cap(w.pending) > limit || cap(w.overflow) > limit {
			t.Errorf("capacity after the backlog was written: got pending %d, overflow %d; want at most %d each",
				cap(w.pending), cap(w.overflow), limit)
		}
	})
}

// fullLog counts the "writer full" log lines.
type fullLog struct {
	mu    sync.Mutex
	lines int
}

func (h *fullLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *fullLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *fullLog) WithGroup(string) slog.Handler            { return h }
func (h *fullLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "ledger writer full") {
		h.mu.Lock()
		h.lines++
		h.mu.Unlock()
	}
	return nil
}

func (h *fullLog) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lines
}

// TestWriterMaxPendingLogsOncePerInterval checks that an outage's drops are
// logged at most once per fullLogInterval, not once per entry.
func TestWriterMaxPendingLogsOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &fullLog{}
		m := newMemStore()
		w := NewWriter(m, WriterOptions{Buffer: 4, MaxPending: 10, Logger: slog.New(h)})
		for range 10 + 1000 { // no Run: as if the store were down
			w.Record(Entry{})
		}
		if got := h.count(); got != 1 {
			t.Fatalf("log lines after 1000 drops: got %d, want 1", got)
		}
		time.Sleep(fullLogInterval - time.Nanosecond)
		w.Record(Entry{})
		if got := h.count(); got != 1 {
			t.Fatalf("log lines just before the interval: got %d, want 1", got)
		}
		time.Sleep(time.Nanosecond)
		w.Record(Entry{})
		w.Record(Entry{})
		if got := h.count(); got != 2 {
			t.Fatalf("log lines at the interval: got %d, want 2", got)
		}
		if st := w.Stats(); st.DroppedFull != 1003 || st.Recorded != 10 {
			t.Errorf("Stats: got %+v, want DroppedFull=1003 Recorded=10", st)
		}
		if err := w.Close(t.Context()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if n, _ := m.stored(); n != 10 {
			t.Errorf("stored: got %d, want 10", n)
		}
	})
}

type nopInserter struct{}

func (nopInserter) Insert(context.Context, []Entry) error { return nil }

// BenchmarkRecord measures the request path's cost of Record while Run
// drains the queue into a store that does nothing: "serial" from one
// goroutine, "parallel" from all Ps. At these rates (millions of entries per
// second, far above any gateway's request rate) the producers outrun the
// single writer loop, so part of the entries go through the overflow list.
func BenchmarkRecord(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			// No cap: every entry is accepted, as before MaxPending, so
			// that the figures compare (dropped/op stays 0).
			w := NewWriter(nopInserter{}, WriterOptions{MaxPending: math.MaxInt, Logger: quiet})
			ctx := context.Background()
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			e := fullEntry("", time.Now())
			b.ReportAllocs()
			b.ResetTimer()
			if parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						w.Record(e)
					}
				})
			} else {
				for range b.N {
					w.Record(e)
				}
			}
			b.StopTimer()
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			<-done
			st := w.Stats()
			b.ReportMetric(float64(st.Overflowed)/float64(b.N), "overflowed/op")
			b.ReportMetric(float64(st.DroppedFull)/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkRecordChannel measures Record's common path, the one a request
// pays while the writer keeps up: the channel has room. Each Record's entry is
// taken back off the channel at once, standing in for Run (which at this rate
// falls behind, see BenchmarkRecord), so that no entry overflows and the
// figure does not hang on how two goroutines are scheduled. Nothing is
// written, so the cap is lifted, or every entry past MaxPending would be
// dropped.
func BenchmarkRecordChannel(b *testing.B) {
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			w := NewWriter(nopInserter{}, WriterOptions{MaxPending: math.MaxInt, Logger: quiet})
			e := fullEntry("", time.Now())
			b.ReportAllocs()
			if parallel {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						w.Record(e)
						<-w.ch
					}
				})
			} else {
				for b.Loop() {
					w.Record(e)
					<-w.ch
				}
			}
			if st := w.Stats(); st.Overflowed != 0 || st.DroppedFull != 0 {
				b.Fatalf("Stats: got %+v, want no entry overflowed or dropped", st)
			}
			if err := w.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkSQLiteInsert measures one batch of 256 entries into SQLite; ns/op
// divided by 256 is the store's cost per ledger entry.
func BenchmarkSQLiteInsert(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, "sqlite://"+filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]Entry, 256)
	b.ReportAllocs()
	for b.Loop() {
		for i := range batch {
			batch[i] = fullEntry("", time.Now())
		}
		if err := s.Insert(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriterBacklog measures the memory a backlog takes per entry, the
// figure behind MaxPending's default: entries as requests make them (a
// request ID and a model name of their own, the rest shared with the config)
// recorded while nothing is written, then the live heap after a GC. Run it
// with -benchtime=1000000x for the default cap.
func BenchmarkWriterBacklog(b *testing.B) {
	w := NewWriter(nopInserter{}, WriterOptions{MaxPending: math.MaxInt, Logger: quiet})
	model := []byte("gpt-4.1-mini") // as parsed from a request body
	before := liveHeap()
	for i := range b.N {
		w.Record(Entry{
			RequestID: fmt.Sprintf("chatcmpl-%024x", i), Model: string(model), KeyID: "team-a", Route: "openai/gpt-4.1-mini",
			Attempts: 1, Stream: true, Status: 200, Outcome: OutcomeOK, InputTokens: 1200, OutputTokens: 300, TokenSource: "usage",
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(liveHeap()-before)/float64(b.N), "heap-B/entry")
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
