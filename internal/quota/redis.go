package quota

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/ratelimit"
	"github.com/streamgate/streamgate/internal/usd"
)

// admitScript checks and counts rpm, tpm and the budget reservation in one
// call. Every key shares the key's hash tag, so one cluster slot holds them.
// The rate inequality is ratelimit's below(); the budget rule is budget's
// (hold the estimate, at most what is left). All values are integers below
// 2^53, exact in Lua; numbers written come from ARGV, never formatted by Lua.
//
// With a budget, the hold is also kept under the admission's own hold key
// (replica id and number, holdTTL) unless that key exists: an admission
// the replica gave up on (timed out: it then decided locally) is voided by
// the flusher, which releases the hold if the call ran, or leaves a
// tombstone that makes the call count nothing if it runs later, as a
// paused or slow Redis does with a command already sent.
//
//	KEYS: rpm current, rpm previous, tpm current, tpm previous minute,
//	      [budget counter of the window, hold key]
//	ARGV: rpm, tpm, elapsed ms, window ms, bucket ttl s,
//	      budget µ$, estimate µ$, ttl s to renew the counter (0: none),
//	      hold ttl s
//	returns {code, rpm prev, rpm cur, tpm prev, tpm cur, committed, held}:
//	code 1 allowed (counted), 0 refused by a rate, 2 refused by the budget,
//	-1 budget counter missing (nothing counted: reconcile, then again),
//	3 voided (nothing counted)
var admitScript = redis.NewScript(`
if KEYS[6] and redis.call('EXISTS', KEYS[6]) == 1 then return {3, 0, 0, 0, 0, 0, 0} end
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local e, w = tonumber(ARGV[3]), tonumber(ARGV[4])
local v = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local rc, rp = tonumber(v[1]) or 0, tonumber(v[2]) or 0
local tc, tp = tonumber(v[3]) or 0, tonumber(v[4]) or 0
if (rpm > 0 and rp * (w - e) + rc * w >= rpm * w) or (tpm > 0 and tp * (w - e) + tc * w >= tpm * w) then
  return {0, rp, rc, tp, tc, 0, 0}
end
local spent, held = 0, 0
if KEYS[5] then
  local s = redis.call('GET', KEYS[5])
  if not s then return {-1, rp, rc, tp, tc, 0, 0} end
  spent = tonumber(s)
  local b = tonumber(ARGV[6])
  if spent >= b then return {2, rp, rc, tp, tc, spent, 0} end
  held = tonumber(ARGV[7])
  if held < b - spent then
    spent = redis.call('INCRBY', KEYS[5], ARGV[7])
  else
    held = b - spent
    spent = b
    redis.call('SET', KEYS[5], ARGV[6], 'KEEPTTL')
  end
  if ARGV[8] ~= '0' then redis.call('EXPIRE', KEYS[5], ARGV[8]) end
  if held > 0 then redis.call('SET', KEYS[6], held, 'EX', ARGV[9]) end
end
if rpm > 0 then
  redis.call('INCR', KEYS[1])
  redis.call('EXPIRE', KEYS[1], ARGV[5])
end
return {1, rp, rc, tp, tc, spent, held}
`)

// reconcileScript sets a budget counter to max(counter, ledger), creating
// it with its TTL when missing (package comment: why max).
//
//	KEYS: the counter; ARGV: ledger µ$, ttl s of a new counter
var reconcileScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
elseif tonumber(v) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
end
return 1
`)

// applyScript applies one write-back batch of one hash tag, once: its
// marker (replica id and sequence number) is set first with SET NX, and a
// batch whose marker exists is a resend, answered 0 and not applied. A
// budget delta goes only to a counter that exists (one gone would be made
// holding only this delta, which admissions would take for the window's
// whole spend; the ledger has the cost for the next reconcile) and
// saturates in [0, usd.MaxSum] as package usd does; a rate bucket delta is
// INCRBY with the bucket's TTL. A void ("v", on an admission's hold key,
// followed by its budget counter as kind "x") releases the hold the key
// records and leaves the key as a tombstone (see admitScript).
//
//	KEYS: marker, then the counters
//	ARGV: marker ttl s, bucket ttl s, usd.MaxSum, then per counter its kind
//	      ("b" budget, "r" rate bucket, "v" void, "x" a void's counter)
//	      and its delta
var applyScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return 0 end
for i = 2, #KEYS do
  local k, d = ARGV[2 * i], tonumber(ARGV[2 * i + 1])
  if k == 'v' then
    local h = redis.call('GET', KEYS[i])
    if h and h ~= 'void' then
      local v = redis.call('GET', KEYS[i + 1])
      if v then
        local n = tonumber(v) - tonumber(h)
        if n < 0 then n = 0 end
        redis.call('SET', KEYS[i + 1], string.format('%d', n), 'KEEPTTL')
      end
    end
    redis.call('SET', KEYS[i], 'void', 'EX', ARGV[1])
  elseif k == 'b' then
    local v = redis.call('GET', KEYS[i])
    if v then
      local n = tonumber(v) + d
      if n > tonumber(ARGV[3]) then
        redis.call('SET', KEYS[i], ARGV[3], 'KEEPTTL')
      elseif n < 0 then
        redis.call('SET', KEYS[i], '0', 'KEEPTTL')
      else
        redis.call('INCRBY', KEYS[i], ARGV[2 * i + 1])
      end
    end
  elseif k == 'r' then
    redis.call('INCRBY', KEYS[i], ARGV[2 * i + 1])
    redis.call('EXPIRE', KEYS[i], ARGV[2])
  end
end
return 1
`)

// errLoad marks a failed SpentFunc: the ledger's fault, not Redis's.
type errLoad struct{ err error }

func (e errLoad) Error() string { return e.err.Error() }
func (e errLoad) Unwrap() error { return e.err }

// admitRedis runs admitScript, reconciling the budget counter first when
// this replica has not yet in its window, and again when the script finds
// it missing.
func (q *Quota) admitRedis(ctx context.Context, t *Ticket, l Limits, est float64, now time.Time) (ratelimit.Decision, error) {
	minute, e := now.UnixMilli()/windowMS, now.UnixMilli()%windowMS
	keys := make([]string, 4, 6)
	keys[0] = t.base + "rpm:" + itoa(minute)
	keys[1] = t.base + "rpm:" + itoa(minute-1)
	keys[2] = t.base + "tpm:" + itoa(minute)
	keys[3] = t.base + "tpm:" + itoa(minute-1)
	var bud, micro int64
	renew := 0
	var start, end time.Time
	if t.counter != "" {
		keys = append(keys, t.counter, t.hold)
		bud, micro = usd.Micro(l.Budget.USD), usd.Micro(est)
		start, end = budget.Window(l.Budget.Period, now)
		if l.Budget.Period == budget.Total {
			renew = int(totalTTL / time.Second)
		}
		if err := q.reconcileOnce(ctx, t.counter, t.key, start, end, now, false); err != nil {
			return ratelimit.Decision{}, err
		}
	}
	rpm, tpm := clampLimit(l.RPM), clampLimit(l.TPM)
	for range 3 {
		v, err := q.run(ctx, keys, rpm, tpm, e, bud, micro, renew)
		if err != nil {
			return ratelimit.Decision{}, err
		}
		switch v[0] {
		case 1, 3: // 3: voided, not expected on the call that is waited for
			t.held = v[6]
			return ratelimit.Decision{Allowed: true}, nil
		case 0:
			d := ratelimit.Decide([2]int64{v[1], v[2]}, [2]int64{v[3], v[4]}, ratelimit.Limits{RPM: int(rpm), TPM: int(tpm)}, e)
			if d.Allowed { // cannot happen: the script and Decide share one inequality
				d = ratelimit.Decision{Limit: "rpm", RetryAfter: time.Second}
			}
			return d, nil
		case 2:
			return ratelimit.Decision{Allowed: true}, &budget.Exceeded{Key: t.key, Limit: l.Budget, Spent: usd.FromMicro(v[5]), Reset: end}
		}
		if err := q.reconcileOnce(ctx, t.counter, t.key, start, end, now, true); err != nil {
			return ratelimit.Decision{}, err
		}
	}
	return ratelimit.Decision{}, fmt.Errorf("quota: budget counter of key %q missing right after its load", t.key)
}

func (q *Quota) run(ctx context.Context, keys []string, rpm, tpm, e, bud, est int64, renew int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	v, err := admitScript.Run(ctx, q.client, keys, rpm, tpm, e, windowMS, bucketTTL, bud, est, renew, holdTTL).Int64Slice()
	if err == nil && len(v) != 7 {
		err = fmt.Errorf("quota: script answered %d values, want 7", len(v))
	}
	return v, err
}

// flight is one reconciliation of a counter by this replica: in progress,
// or done (kept until the counter's window has ended).
type flight struct {
	done chan struct{}
	err  error
	end  time.Time // the window's end; zero for Total
}

// reconcileOnce reconciles counter unless this replica did in its window
// (again when force, but concurrent forced calls share one), so that the
// first requests of a key call the SpentFunc once per replica.
func (q *Quota) reconcileOnce(ctx context.Context, counter, key string, start, end, now time.Time, force bool) error {
	q.rmu.Lock()
	f := q.recon[counter]
	if f != nil {
		select {
		case <-f.done:
			if f.err != nil || force {
				f = nil // failed, or missing again: once more
			}
		default:
		}
	}
	if f != nil {
		q.rmu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if q.recon == nil {
		q.recon = make(map[string]*flight)
	}
	if len(q.recon) >= 1024 { // amortised sweep of ended windows
		for c, f := range q.recon {
			if !f.end.IsZero() && now.After(f.end.Add(pastEnd)) {
				delete(q.recon, c)
			}
		}
	}
	f = &flight{done: make(chan struct{}), end: end}
	q.recon[counter] = f
	q.rmu.Unlock()
	f.err = q.reconcile(ctx, counter, key, start, end, now)
	close(f.done)
	return f.err
}

// reconcile sets counter to max(counter, the ledger's spend since start).
func (q *Quota) reconcile(ctx context.Context, counter, key string, start, end, now time.Time) error {
	spent, err := q.spent(ctx, key, start)
	if err != nil {
		return errLoad{fmt.Errorf("budget: load spend of key %q since %s: %w", key, start.Format(time.RFC3339), err)}
	}
	ttl := totalTTL
	if !end.IsZero() {
		ttl = end.Add(pastEnd).Sub(now)
	}
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	return reconcileScript.Run(ctx, q.client, []string{counter}, usd.Micro(spent), int64(ttl/time.Second)).Err()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
