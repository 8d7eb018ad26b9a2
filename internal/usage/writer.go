package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// WriterOptions tune a Writer. Every zero field takes the default named on it.
type WriterOptions struct {
	BatchSize     int           // entries per Insert at most; default 256
	FlushInterval time.Duration // longest wait before a partial batch is written; default 200ms
	Buffer        int           // channel capacity before the overflow list is used; default 4096
	MaxPending    int           // cap on entries accepted and not yet stored, past it Record drops new ones; default 1,000,000 (see Writer)
	MinBackoff    time.Duration // first wait after a failed Insert; default 100ms
	MaxBackoff    time.Duration // the wait doubles up to this; default 5s
	InsertTimeout time.Duration // deadline of one Insert attempt; default 10s
	Logger        *slog.Logger  // failed inserts are logged here; default slog.Default()
}

func (o *WriterOptions) setDefaults() {
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 200 * time.Millisecond
	}
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 1_000_000
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.InsertTimeout <= 0 {
		o.InsertTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Stats are the Writer's counters, for /metrics. Counts are of entries unless
// named otherwise.
type Stats struct {
	Recorded      uint64 // accepted by Record (before Close)
	Written       uint64 // stored by a successful Insert
	Pending       uint64 // accepted and not yet stored: Recorded - Written
	Overflowed    uint64 // accepted while the channel was full, kept in the overflow list
	FailedInserts uint64 // Insert calls (batches) that failed; their entries are retried
	Dropped       uint64 // passed to Record after Close began: not stored
	DroppedFull   uint64 // passed to Record while MaxPending entries were pending: not stored
}

// Writer is the ledger's Recorder: Record queues an entry without blocking and
// a background loop (Run) writes batches to the store, retrying failed batches
// with exponential backoff until they are stored.
//
// Nothing is lost while the Writer is open and fewer than MaxPending entries
// wait: when the channel (Buffer) is full, Record appends the entry to an
// overflow list under a mutex instead of blocking the request or dropping it,
// so memory, not the ledger, absorbs a burst or a database outage (watch
// Stats().Pending). Close flushes whatever is still queued.
//
// That memory is about 320 bytes an entry (BenchmarkWriterBacklog: 224 for
// the Entry, a request ID and a model name of its own, up to a quarter more
// for the list's growth; an error message adds its length), so the default
// cap of a million entries holds about 320 MB at most. The backlog's arrays
// are given back to the GC once it is written and Run is idle.
//
// Two cases lose entries, each counted:
//   - A database outage (or a store slower than the request rate) that lasts
//     until MaxPending entries wait: at the default of a million, 17 minutes
//     at 1,000 requests/s. From then on Record drops each new entry, counts it
//     in Stats().DroppedFull and logs at most one line a minute, until the
//     store takes writes again and the backlog falls below the cap. The
//     entries accepted before are all stored once it recovers. The oldest
//     are kept rather than the newest because they are the ones being
//     written: Run holds them in batches whose IDs are fixed, perhaps in an
//     insert whose outcome is unknown, and evicting them would need Run's
//     lock on the request path. Refusing at the door costs Record one atomic
//     add, and leaves one gap: the requests of a single stretch of time, from
//     the moment the cap was reached until the store is back, which the
//     request metrics and logs still show.
//   - An entry recorded after Close began, counted in Stats().Dropped.
//
// Create a Writer with NewWriter; the zero Writer is not usable.
type Writer struct {
	dst  Inserter
	opts WriterOptions
	ch   chan Entry

	// mu orders Record against Close: Record holds it shared while it
	// enqueues, Close takes it exclusively to set closed, so once Close has it
	// no entry can still be on its way into the queue.
	mu     sync.RWMutex
	closed bool

	ofMu     sync.Mutex
	overflow []Entry
	ofLen    atomic.Int64 // len(overflow), read without ofMu

	stop     chan struct{} // closed by Close: Run returns
	stopOnce sync.Once

	runMu   sync.Mutex
	running bool          // Run has been called
	stopped bool          // Close has been called: Run must not start
	runDone chan struct{} // closed when Run returns

	// pending[head:] are the entries taken off the queue and not yet
	// written: a FIFO owned by Run while it runs, then by Close (closeMu).
	pending []Entry
	head    int
	closeMu sync.Mutex

	// inflight is the MaxPending reservation: entries accepted and not yet
	// stored, taken before recorded counts an entry and given back when it
	// is written, so the cap holds exactly however many Records race. It
	// sits next to recorded so that Record's two adds usually touch one
	// cache line (BenchmarkRecordChannel: no measurable cost).
	inflight                            atomic.Int64
	recorded, written, overflowed       atomic.Uint64
	failedInserts, dropped, droppedFull atomic.Uint64
	loggedDrop                          atomic.Bool
	nextFullLog                         atomic.Int64 // UnixNano before which a DroppedFull is not logged
	lastErr                             atomic.Pointer[error]
}

// fullLogInterval spaces the log lines of entries dropped for MaxPending: an
// outage drops thousands a second, one line a minute says it all.
const fullLogInterval = time.Minute

var _ Recorder = (*Writer)(nil)

// NewWriter returns a Writer that stores entries through dst. Start its loop
// with Run and stop it with Close.
func NewWriter(dst Inserter, opts WriterOptions) *Writer {
	opts.setDefaults()
	return &Writer{
		dst:     dst,
		opts:    opts,
		ch:      make(chan Entry, opts.Buffer),
		stop:    make(chan struct{}),
		pending: make([]Entry, 0, opts.BatchSize),
	}
}

// Record queues e for writing and returns at once; it never blocks on the
// database. A zero e.Time is set to now. Safe for concurrent use. When
// MaxPending entries are already waiting, e is dropped and counted in
// Stats().DroppedFull; after Close has begun, in Stats().Dropped.
func (w *Writer) Record(e Entry) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		w.dropped.Add(1)
		if !w.loggedDrop.Swap(true) {
			w.opts.Logger.Error("usage: entry recorded after the ledger writer closed: dropped",
				"request_id", e.RequestID, "model", e.Model)
		}
		return
	}
	if w.inflight.Add(1) > int64(w.opts.MaxPending) {
		w.inflight.Add(-1)
		w.mu.RUnlock()
		w.dropFull(e)
		return
	}
	w.recorded.Add(1)
	select {
	case w.ch <- e:
	default:
		// The channel is full (burst or database outage): keep the entry in
		// memory rather than block the request or lose it.
		w.ofMu.Lock()
		w.overflow = append(w.overflow, e)
		w.ofLen.Store(int64(len(w.overflow)))
		w.ofMu.Unlock()
		w.overflowed.Add(1)
	}
	w.mu.RUnlock()
}

// dropFull counts e as dropped for MaxPending, and logs it unless a drop was
// logged less than fullLogInterval ago.
func (w *Writer) dropFull(e Entry) {
	n := w.droppedFull.Add(1)
	now := time.Now().UnixNano()
	next := w.nextFullLog.Load()
	if now < next || !w.nextFullLog.CompareAndSwap(next, now+int64(fullLogInterval)) {
		return
	}
	args := []any{"max_pending", w.opts.MaxPending, "dropped_full_total", n, "request_id", e.RequestID, "model", e.Model}
	if last := w.lastErr.Load(); last != nil {
		args = append(args, "last_insert_error", *last)
	}
	w.opts.Logger.Error("usage: ledger writer full, the store is down or too slow: new entries dropped", args...)
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (w *Writer) Stats() Stats {
	// written first: an entry is recorded before it is written, so this
	// order keeps Pending from going below zero under concurrent updates.
	wr := w.written.Load()
	rec := w.recorded.Load()
	return Stats{
		Recorded:      rec,
		Written:       wr,
		Pending:       rec - wr,
		Overflowed:    w.overflowed.Load(),
		FailedInserts: w.failedInserts.Load(),
		Dropped:       w.dropped.Load(),
		DroppedFull:   w.droppedFull.Load(),
	}
}

// Run writes queued entries until ctx is done or Close is called, then
// returns nil; entries still queued then are written by Close. A batch is
// written when BatchSize entries are queued or FlushInterval after the oldest
// unwritten entry arrived; a failed batch is retried with backoff, and
// entries keep queueing meanwhile. Run may be called once: a second call
// returns an error at once; a call after Close returns nil at once.
func (w *Writer) Run(ctx context.Context) error {
	w.runMu.Lock()
	if w.running {
		w.runMu.Unlock()
		return errors.New("usage: writer: Run called twice")
	}
	if w.stopped {
		// Close came first (a shutdown right after start): Close writes
		// everything, there is nothing to run.
		w.runMu.Unlock()
		return nil
	}
	w.running = true
	w.runDone = make(chan struct{})
	done := w.runDone
	w.runMu.Unlock()
	defer close(done)

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	armed, due := false, false
	for {
		select {
		case <-w.stop:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		w.gather(w.opts.BatchSize)
		if n := w.queued(); n >= w.opts.BatchSize || (due && n > 0) {
			if !w.writeHead(ctx, w.stop) {
				return nil // stopped while retrying: Close takes over
			}
			// Entries left over (queued during a slow write or a retry)
			// stay due: they have waited long enough.
			if w.queued() == 0 {
				due = false
			}
			continue
		}
		if w.queued() > 0 && !armed {
			timer.Reset(w.opts.FlushInterval)
			armed = true
		} else if w.queued() == 0 {
			w.shrink()
		}
		select {
		case <-w.stop:
			return nil
		case <-ctx.Done():
			return nil
		case e := <-w.ch:
			w.push(e)
		case <-timer.C:
			armed, due = false, true
		}
	}
}

// queued returns how many entries pending holds.
func (w *Writer) queued() int { return len(w.pending) - w.head }

// push appends e to pending.
func (w *Writer) push(e Entry) {
	if len(w.pending) == cap(w.pending) {
		w.compact()
	}
	w.pending = append(w.pending, e)
}

// compact moves pending[head:] to the front when at least half of pending is
// written entries, so that the FIFO costs O(1) per entry amortized.
func (w *Writer) compact() {
	if w.head == 0 || w.head < len(w.pending)/2 {
		return
	}
	n := copy(w.pending, w.pending[w.head:])
	clear(w.pending[n:])
	w.pending, w.head = w.pending[:n], 0
}

// gather moves queued entries into pending without blocking: from the channel
// until pending holds limit entries (limit <= 0: until it is empty), then the
// whole overflow list, so that overflowed entries are never starved.
func (w *Writer) gather(limit int) {
drain:
	for limit <= 0 || w.queued() < limit {
		select {
		case e := <-w.ch:
			w.push(e)
		default:
			break drain
		}
	}
	if w.ofLen.Load() > 0 {
		w.ofMu.Lock()
		if q := w.pending[w.head:]; len(q) <= len(w.overflow) {
			// Keep the larger array, the overflow list's, and move the
			// entries queued before it to its front (in place when it has
			// room): after an outage it holds up to MaxPending entries, and
			// appending it to pending would hold two such arrays at once.
			old := w.pending
			w.pending = slices.Insert(w.overflow, 0, q...)
			clear(old)
			w.overflow, w.head = old[:0], 0
		} else {
			w.compact()
			w.pending = append(w.pending, w.overflow...)
			clear(w.overflow)
			w.overflow = w.overflow[:0]
		}
		w.ofLen.Store(0)
		w.ofMu.Unlock()
	}
}

// shrink gives a backlog's arrays back to the GC; Run calls it when idle,
// nothing queued. After a long outage they hold up to MaxPending entries,
// hundreds of MB; arrays up to a few channels' worth are kept, and under
// sustained load Run is never idle, so a busy Writer does not reallocate.
func (w *Writer) shrink() {
	limit := 4 * max(w.opts.BatchSize, w.opts.Buffer)
	if cap(w.pending) > limit {
		w.pending, w.head = make([]Entry, 0, w.opts.BatchSize), 0
	}
	w.ofMu.Lock()
	if len(w.overflow) == 0 && cap(w.overflow) > limit {
		w.overflow = nil
	}
	w.ofMu.Unlock()
}

// writeHead stores the first BatchSize entries of pending, retrying with
// backoff until it succeeds (true) or ctx is done or stop is closed (false,
// pending unchanged). It also returns false at once when ctx is already done.
func (w *Writer) writeHead(ctx context.Context, stop <-chan struct{}) bool {
	batch := w.pending[w.head : w.head+min(w.queued(), w.opts.BatchSize)]
	// IDs are fixed before the first attempt, so a retry after an ambiguous
	// failure (a commit whose reply was lost) cannot store an entry twice.
	assignIDs(batch)
	backoff := w.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return false
		}
		ictx, cancel := context.WithTimeout(ctx, w.opts.InsertTimeout)
		err := w.dst.Insert(ictx, batch)
		cancel()
		if err == nil {
			n := len(batch)
			w.written.Add(uint64(n))
			w.inflight.Add(-int64(n))
			clear(batch) // drop the strings for the GC
			w.head += n
			if w.head == len(w.pending) {
				w.pending, w.head = w.pending[:0], 0
			}
			return true
		}
		if ctx.Err() != nil {
			return false // cancelled, not a store failure
		}
		w.failedInserts.Add(1)
		w.lastErr.Store(&err)
		w.opts.Logger.Warn("usage: ledger insert failed, will retry",
			"entries", len(batch), "attempt", attempt, "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-stop:
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, w.opts.MaxBackoff)
	}
}

// Close stops Record from accepting entries, stops Run, and writes every
// entry still queued, retrying failed batches with backoff until ctx is done.
// It returns nil when everything recorded was stored; otherwise an error that
// states how many entries were not written and wraps ctx.Err(). Close may be
// called again to retry after an error. It does not close the store.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stopOnce.Do(func() { close(w.stop) })

	w.runMu.Lock()
	w.stopped = true
	done := w.runDone
	w.runMu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return w.unwritten(ctx)
		}
	}

	w.closeMu.Lock()
	defer w.closeMu.Unlock()
	for {
		// No Record can enqueue any more (closed is set under mu), so an
		// empty channel and overflow list mean everything is in pending.
		w.gather(0)
		if w.queued() == 0 {
			return nil
		}
		if !w.writeHead(ctx, nil) {
			return w.unwritten(ctx)
		}
	}
}

func (w *Writer) unwritten(ctx context.Context) error {
	s := w.Stats()
	if s.Pending == 0 {
		return nil
	}
	err := fmt.Errorf("usage: writer close: %d ledger entries not written: %w", s.Pending, context.Cause(ctx))
	if last := w.lastErr.Load(); last != nil {
		err = fmt.Errorf("%w (last insert error: %v)", err, *last)
	}
	return err
}

// MaxPending is how many entries may wait before Record drops new ones
// (Options.MaxPending): readiness compares Stats().Pending with it.
func (w *Writer) MaxPending() int { return w.opts.MaxPending }
