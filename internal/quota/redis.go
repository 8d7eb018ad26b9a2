package quota

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/ratelimit"
	"github.com/streamgate/streamgate/internal/usd"
)

// admitScript checks and counts the rpm, tpm and budget reservation of
// every subject of a request (its key, its team, the key's budget for the
// model) in one call: all of them or, if one refuses, none. Every key
// shares one hash tag, so one cluster slot holds them. The rate inequality
// is ratelimit's below(); the budget rule is budget's (hold the estimate,
// at most what is left), for each budget. All values are integers below
// 2^53, exact in Lua; numbers written come from ARGV, never formatted by
// Lua.
//
// With a budget, the hold is also kept under the admission's own hold key
// (replica id and number, holdTTL), one per budget, unless one of them
// exists: an admission the replica gave up on (timed out: it then decided
// locally) is voided by the flusher, which releases each hold if the call
// ran, or leaves tombstones that make the call count nothing if it runs
// later, as a paused or slow Redis does with a command already sent.
//
//	KEYS: per subject: rpm current, rpm previous, tpm current, tpm
//	      previous minute, [budget counter of the window, hold key]
//	ARGV: elapsed ms, window ms, bucket ttl s, estimate µ$, hold ttl s,
//	      number of subjects; then per subject: rpm, tpm, budget µ$ (0:
//	      none, and no counter and hold keys), ttl s to renew the counter
//	      (0: none)
//	returns {code, subject, rpm prev, rpm cur, tpm prev, tpm cur,
//	      committed, held per subject…}: code 1 allowed (counted), 0
//	      refused by the subject's rate, 2 refused by its budget, -1 its
//	      budget counter missing (nothing counted: reconcile, then again),
//	      3 voided (nothing counted); subject 1-based
var admitScript = redis.NewScript(`
local e, w, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[6])
local subs, k = {}, 1
for i = 1, n do
  local a = 6 + (i - 1) * 4
  local s = {k = k, a = a, rpm = tonumber(ARGV[a + 1]), tpm = tonumber(ARGV[a + 2]), b = tonumber(ARGV[a + 3])}
  if s.b > 0 then s.c, s.h, k = k + 4, k + 5, k + 6 else k = k + 4 end
  subs[i] = s
end
for i = 1, n do
  local s = subs[i]
  if s.h and redis.call('EXISTS', KEYS[s.h]) == 1 then return {3, i, 0, 0, 0, 0, 0} end
end
for i = 1, n do
  local s = subs[i]
  if s.rpm > 0 or s.tpm > 0 then
    local v = redis.call('MGET', KEYS[s.k], KEYS[s.k + 1], KEYS[s.k + 2], KEYS[s.k + 3])
    local rc, rp = tonumber(v[1]) or 0, tonumber(v[2]) or 0
    local tc, tp = tonumber(v[3]) or 0, tonumber(v[4]) or 0
    if (s.rpm > 0 and rp * (w - e) + rc * w >= s.rpm * w) or (s.tpm > 0 and tp * (w - e) + tc * w >= s.tpm * w) then
      return {0, i, rp, rc, tp, tc, 0}
    end
  end
end
for i = 1, n do
  local s = subs[i]
  if s.c then
    local v = redis.call('GET', KEYS[s.c])
    if not v then return {-1, i, 0, 0, 0, 0, 0} end
    s.spent = tonumber(v)
    if s.spent >= s.b then return {2, i, 0, 0, 0, 0, s.spent} end
  end
end
local out = {1, 0, 0, 0, 0, 0, 0}
for i = 1, n do
  local s = subs[i]
  local held = 0
  if s.c then
    held = tonumber(ARGV[4])
    if held < s.b - s.spent then
      redis.call('INCRBY', KEYS[s.c], ARGV[4])
    else
      held = s.b - s.spent
      redis.call('SET', KEYS[s.c], ARGV[s.a + 3], 'KEEPTTL')
    end
    if ARGV[s.a + 4] ~= '0' then redis.call('EXPIRE', KEYS[s.c], ARGV[s.a + 4]) end
    if held > 0 then redis.call('SET', KEYS[s.h], held, 'EX', ARGV[5]) end
  end
  if s.rpm > 0 then
    redis.call('INCR', KEYS[s.k])
    redis.call('EXPIRE', KEYS[s.k], ARGV[3])
  end
  out[7 + i] = held
end
return out
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

// admitRedis runs admitScript, reconciling each budget counter first when
// this replica has not yet in its window, and again when the script finds
// one missing.
func (q *Quota) admitRedis(ctx context.Context, t *Ticket, subs []Subject, est float64, now time.Time) (Refusal, error) {
	minute, e := now.UnixMilli()/windowMS, now.UnixMilli()%windowMS
	keys := make([]string, 0, 6*len(subs))
	args := make([]any, 0, 6+4*len(subs))
	args = append(args, e, windowMS, bucketTTL, usd.Micro(est), holdTTL, len(subs))
	type win struct{ start, end time.Time }
	wins := make([]win, len(subs))
	for i, s := range subs {
		h := &t.subs[i]
		keys = append(keys, h.base+"rpm:"+itoa(minute), h.base+"rpm:"+itoa(minute-1), h.base+"tpm:"+itoa(minute), h.base+"tpm:"+itoa(minute-1))
		var bud int64
		renew := 0
		if h.counter != "" {
			keys = append(keys, h.counter, h.hold)
			bud = usd.Micro(s.Budget.USD)
			wins[i].start, wins[i].end = budget.Window(s.Budget.Period, now)
			if s.Budget.Period == budget.Total {
				renew = int(totalTTL / time.Second)
			}
			if err := q.reconcileOnce(ctx, h.counter, h.id, wins[i].start, wins[i].end, now, false); err != nil {
				return Refusal{}, err
			}
		}
		args = append(args, clampLimit(s.RPM), clampLimit(s.TPM), bud, renew)
	}
	for range 3 {
		v, err := q.run(ctx, keys, args, 7+len(subs))
		if err != nil {
			return Refusal{}, err
		}
		i := int(v[1]) - 1
		if v[0] != 1 && v[0] != 3 && (i < 0 || i >= len(subs)) {
			return Refusal{}, fmt.Errorf("quota: script named subject %d of %d", v[1], len(subs))
		}
		switch v[0] {
		case 1, 3: // 3: voided, not expected on the call that is waited for
			for j := range t.subs {
				t.subs[j].held = v[7+j]
			}
			return Refusal{Decision: ratelimit.Decision{Allowed: true}}, nil
		case 0:
			s := subs[i]
			lim := ratelimit.Limits{RPM: int(clampLimit(s.RPM)), TPM: int(clampLimit(s.TPM))}
			d := ratelimit.Decide([2]int64{v[2], v[3]}, [2]int64{v[4], v[5]}, lim, e)
			if d.Allowed { // cannot happen: the script and Decide share one inequality
				d = ratelimit.Decision{Limit: "rpm", RetryAfter: time.Second}
			}
			return Refusal{Decision: d, Subject: i}, nil
		case 2:
			s := subs[i]
			return Refusal{Decision: ratelimit.Decision{Allowed: true}, Subject: i},
				&budget.Exceeded{Scope: s.Scope, Key: s.Name, Model: s.Model, Limit: s.Budget, Spent: usd.FromMicro(v[6]), Reset: wins[i].end}
		}
		h := &t.subs[i]
		if err := q.reconcileOnce(ctx, h.counter, h.id, wins[i].start, wins[i].end, now, true); err != nil {
			return Refusal{}, err
		}
	}
	return Refusal{}, fmt.Errorf("quota: a budget counter of %s %q missing right after its load", subs[0].Scope, subs[0].Name)
}

func (q *Quota) run(ctx context.Context, keys []string, args []any, want int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	cmd, err := q.call(ctx, keys, args)
	var v []int64
	if err == nil {
		v, err = cmd.Int64Slice()
	}
	if err == nil && len(v) != want && !(len(v) == 7 && v[0] != 1) {
		err = fmt.Errorf("quota: script answered %d values, want %d", len(v), want)
	}
	if err == nil && len(v) < want {
		v = append(v, make([]int64, want-len(v))...)
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
		return errLoad{fmt.Errorf("budget: load spend of %s since %s: %w", describeID(key), start.Format(time.RFC3339), err)}
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

// describeID names a subject's id (Subject.id) in an error: key "a",
// team "b", key "a" on model "m".
func describeID(id string) string {
	if rest, ok := strings.CutPrefix(id, "\x00team\x00"); ok {
		return fmt.Sprintf("team %q", rest)
	}
	if rest, ok := strings.CutPrefix(id, "\x00model\x00"); ok {
		key, model, _ := strings.Cut(rest, "\x00")
		return fmt.Sprintf("key %q on model %q", key, model)
	}
	return fmt.Sprintf("key %q", id)
}
