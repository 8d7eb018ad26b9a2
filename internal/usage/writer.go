package usage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// WriterOptions tune a Writer. Every zero field takes the default named on it.
type WriterOptions struct {
	BatchSize     int           // entries per Insert at most; default 256
	FlushInterval time.Duration // longest wait before a partial batch is written; default 200ms
	Buffer        int           // channel capacity before the overflow list is used; default 4096
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
}

// Writer is the ledger's Recorder: Record queues an entry without blocking and
// a background loop (Run) writes batches to the store, retrying failed batches
// with exponential backoff until they are stored.
//
// Nothing is lost while the Writer is open: when the channel (Buffer) is full,
// Record appends the entry to an overflow list under a mutex instead of
// blocking the request or dropping it, so memory, not the ledger, absorbs a
// burst or a database outage (watch Stats().Pending). Close flushes whatever
// is still queued. Only an entry recorded after Close began is dropped, and
// counted in Stats().Dropped.
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

	recorded, written, overflowed, failedInserts, dropped atomic.Uint64
	loggedDrop                                            atomic.Bool
	lastErr                                               atomic.Pointer[error]
}

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
// database. A zero e.Time is set to now. Safe for concurrent use. After Close
// has begun, e is dropped and counted in Stats().Dropped.
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
		w.compact()
		w.pending = append(w.pending, w.overflow...)
		clear(w.overflow)
		w.overflow = w.overflow[:0]
		w.ofLen.Store(0)
		w.ofMu.Unlock()
	}
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
