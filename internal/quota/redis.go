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

// admitScript admits a batch of admissions of one hash tag (one cluster
// slot), in the order given, each as if alone: it checks and counts the
// rpm, tpm and budget reservation of every subject of the admission (its
// key, its team, the key's budget for the model): all of them or, if one
// refuses, none, and goes on with the next. One call answers a burst of a
// key: each counter is read once and written once (its sum) per call,
// instead of once per admission, and Redis's cost of a script call is
// paid once (BenchmarkAdmitWave). The rate inequality is ratelimit's
// below(); the budget rule is budget's (hold the estimate, at most what is
// left), for each budget. All values are integers below 2^53, exact in
// Lua; numbers written are formatted with %d.
//
// With a budget, the hold is also kept under the admission's own hold key
// (replica id and number, holdTTL), one per budget, unless one of them
// exists: an admission the replica gave up on (timed out: it then decided
// locally) is voided by the flusher, which releases each hold if the call
// ran, or leaves tombstones that make the call count nothing if it runs
// later, as a paused or slow Redis does with a command already sent.
//
//	KEYS: every key the admissions name, once each, the hold keys last
//	ARGV: window ms, bucket ttl s, hold ttl s, number of admissions,
//	      index of the first hold key in KEYS (0: none); then per
//	      admission: elapsed ms in its minute, estimate µ$ (of one
//	      request), requests asked (1, or more for a lease), number of
//	      subjects; then per subject: rpm, tpm, budget µ$ (0: none), ttl s
//	      to renew the budget counter (0: none), and the indexes in KEYS
//	      (0: none) of its rpm current and previous minute, tpm current
//	      and previous minute, budget counter of the window, hold key
//	returns per admission {code, subject, rpm prev, rpm cur, tpm prev,
//	      tpm cur, committed, requests granted, held per subject…}: code
//	      1 allowed (counted), 0 refused by the subject's rate, 2 refused
//	      by its budget, -1 its budget counter missing (nothing counted:
//	      reconcile, then again), 3 voided (nothing counted), 4 no
//	      lease near a limit (nothing counted); subject 1-based
//
// A lease (requests asked > 1, lease.go) is admitted as one request is,
// then granted what fits far from the limits: as many requests as asked,
// at most an eighth of the rpm room of each subject, and for each budget
// the estimate of each, at most an eighth of what is left. A subject with
// fewer than leaseFloor requests of room (rpm) or estimates left (budget)
// grants none: code 4, nothing counted.
//
// The script is written for its cost in Redis, which is single-threaded:
// no table made per admission, each ARGV read where it is needed.
var admitScript = redis.NewScript(`
local w, m, fh = tonumber(ARGV[1]), tonumber(ARGV[4]), tonumber(ARGV[5])
local val, add, ttl, touched, nt = {}, {}, {}, {}, 0
local function count(i, d, t)
  if add[i] then add[i] = add[i] + d else add[i] = d; nt = nt + 1; touched[nt] = i end
  val[i] = (val[i] or 0) + d
  if t ~= '0' then ttl[i] = t end
end
local voids = false
if fh == #KEYS then voids = redis.call('EXISTS', KEYS[fh]) > 0
elseif fh > 0 then voids = redis.call('EXISTS', unpack(KEYS, fh, #KEYS)) > 0 end
local out, no, a = {}, 0, 6
for _ = 1, m do
  local e, est, g, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local first, last, estArg, lease = a + 4, a + 4 + 10 * (n - 1), ARGV[a + 1], g > 1
  a = a + 4 + 10 * n
  local code, sub, x1, x2, x3, x4, x5 = 1, 0, 0, 0, 0, 0, 0
  if voids then
    for o = first, last, 10 do
      local h = tonumber(ARGV[o + 9])
      if h > 0 and redis.call('EXISTS', KEYS[h]) == 1 then code, sub = 3, (o - first) / 10 + 1; break end
    end
  end
  if code == 1 then
    for o = first, last, 10 do
      local rpm, tpm = tonumber(ARGV[o]), tonumber(ARGV[o + 1])
      if rpm > 0 or tpm > 0 then
        local i1, i2, i3, i4 = tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6]), tonumber(ARGV[o + 7])
        if val[i1] == nil or val[i2] == nil or val[i3] == nil or val[i4] == nil then
          local v = redis.call('MGET', KEYS[i1], KEYS[i2], KEYS[i3], KEYS[i4])
          if val[i1] == nil then val[i1] = tonumber(v[1]) or 0 end
          if val[i2] == nil then val[i2] = tonumber(v[2]) or 0 end
          if val[i3] == nil then val[i3] = tonumber(v[3]) or 0 end
          if val[i4] == nil then val[i4] = tonumber(v[4]) or 0 end
        end
        local rc, rp, tc, tp = val[i1], val[i2], val[i3], val[i4]
        if (rpm > 0 and rp * (w - e) + rc * w >= rpm * w) or (tpm > 0 and tp * (w - e) + tc * w >= tpm * w) then
          code, sub, x1, x2, x3, x4 = 0, (o - first) / 10 + 1, rp, rc, tp, tc
          break
        end
        if lease and rpm > 0 then
          local fit = math.floor((rpm * w - rp * (w - e) - rc * w - 1) / w) + 1
          if fit < ` + strconv.Itoa(leaseFloor) + ` then code, sub = 4, (o - first) / 10 + 1; break end
          g = math.min(g, math.floor(fit / 8))
        end
      end
    end
  end
  if code == 1 then
    for o = first, last, 10 do
      local c = tonumber(ARGV[o + 8])
      if c > 0 then
        local v = val[c]
        if v == nil then v = tonumber(redis.call('GET', KEYS[c])) or false; val[c] = v end
        if not v then code, sub = -1, (o - first) / 10 + 1; break end
        if v >= tonumber(ARGV[o + 2]) then code, sub, x5 = 2, (o - first) / 10 + 1, v; break end
        if lease and tonumber(ARGV[o + 2]) - v < ` + strconv.Itoa(leaseFloor) + ` * est then code, sub = 4, (o - first) / 10 + 1; break end
      end
    end
  end
  if code ~= 1 then g = 0 end
  out[no + 1], out[no + 2], out[no + 3], out[no + 4], out[no + 5], out[no + 6], out[no + 7], out[no + 8] = code, sub, x1, x2, x3, x4, x5, g
  no = no + 8
  for o = first, last, 10 do
    local held = 0
    if code == 1 then
      local c = tonumber(ARGV[o + 8])
      if c > 0 then
        local left = tonumber(ARGV[o + 2]) - val[c]
        if lease then held = math.min(g * est, math.floor(left / 8)) else held = math.min(est, left) end
        count(c, held, ARGV[o + 3])
        if held > 0 then
          redis.call('SET', KEYS[tonumber(ARGV[o + 9])], held == est and estArg or string.format('%d', held), 'EX', ARGV[3])
        end
      end
      if ARGV[o] ~= '0' then count(tonumber(ARGV[o + 4]), g, ARGV[2]) end
    end
    no = no + 1
    out[no] = held
  end
end
for j = 1, nt do
  local i = touched[j]
  local d = add[i]
  if d == 1 then redis.call('INCR', KEYS[i]) elseif d ~= 0 then redis.call('INCRBY', KEYS[i], string.format('%d', d)) end
  if ttl[i] then redis.call('EXPIRE', KEYS[i], ttl[i]) end
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

// call is one admission's part of an admitScript call.
type call struct {
	tag  string // the hash tag of every key of the admission
	e    int64  // ms elapsed in the minute
	est  int64  // the estimate of one request, µ$
	n    int64  // requests asked: 0 or 1 for an admission, more for a lease
	subs []callSub
}

// callSub is one subject of a call: its limits and its keys ("" when not
// needed: no rate limit, no budget).
type callSub struct {
	rpm, tpm, budget, renew int64
	keys                    [6]string // rpm cur, rpm prev, tpm cur, tpm prev, counter, hold
}

// answerLen is the length of a call's answer in admitScript's reply.
func (c *call) answerLen() int { return 8 + len(c.subs) }

// scriptArgs is admitScript's KEYS and ARGV for calls, all of one hash tag,
// in that order; each key is sent once, however many calls name it, the
// hold keys (one per call and budget) last.
func scriptArgs(calls []*call) (keys []string, args []any) {
	n, holds := 5, 0
	var index map[string]int // a call alone scans its few keys instead
	if len(calls) > 1 {
		index = make(map[string]int, 4+2*len(calls))
	}
	at := func(k string) int {
		if index != nil {
			return index[k]
		}
		for i, x := range keys {
			if x == k {
				return i + 1
			}
		}
		return 0
	}
	for _, c := range calls {
		n += 4 + 10*len(c.subs)
		for _, s := range c.subs {
			for _, k := range s.keys[:5] {
				if k != "" && at(k) == 0 {
					keys = append(keys, k)
					if index != nil {
						index[k] = len(keys)
					}
				}
			}
			if s.keys[5] != "" {
				holds++
			}
		}
	}
	firstHold := 0
	if holds > 0 {
		firstHold = len(keys) + 1
	}
	args = make([]any, 0, n)
	args = append(args, windowMS, bucketTTL, holdTTL, len(calls), firstHold)
	for _, c := range calls {
		args = append(args, c.e, c.est, max(c.n, 1), len(c.subs))
		for _, s := range c.subs {
			args = append(args, s.rpm, s.tpm, s.budget, s.renew)
			for _, k := range s.keys[:5] {
				if k == "" {
					args = append(args, 0)
				} else {
					args = append(args, at(k))
				}
			}
			if s.keys[5] == "" {
				args = append(args, 0)
				continue
			}
			keys = append(keys, s.keys[5]) // unique: numbered by admission
			args = append(args, len(keys))
		}
	}
	return keys, args
}

// answers splits admitScript's reply v into the answers of calls.
func answers(v []int64, calls []*call) ([][]int64, error) {
	out := make([][]int64, len(calls))
	for i, c := range calls {
		n := c.answerLen()
		if len(v) < n {
			return nil, fmt.Errorf("quota: script answered %d values for %d admissions, short of the %dth", len(v), len(calls), i+1)
		}
		out[i], v = v[:n:n], v[n:]
	}
	if len(v) != 0 {
		return nil, fmt.Errorf("quota: script answered %d values more than %d admissions take", len(v), len(calls))
	}
	return out, nil
}

// admitRedis runs admitScript for t (through the pipeliner, batched with
// the admissions of the same hash tag queued meanwhile), reconciling each
// budget counter first when this replica has not yet in its window, and
// again when the script finds one missing.
func (q *Quota) admitRedis(ctx context.Context, t *Ticket, subs []Subject, est float64, now time.Time) (Refusal, error) {
	c := newCall(t, subs, now, usd.Micro(est), 1)
	e := c.e
	type win struct{ start, end time.Time }
	wins := make([]win, len(subs))
	for i, s := range subs {
		if h := &t.subs[i]; h.counter != "" {
			wins[i].start, wins[i].end = budget.Window(s.Budget.Period, now)
			if err := q.reconcileOnce(ctx, h.counter, h.id, wins[i].start, wins[i].end, now, false); err != nil {
				return Refusal{}, err
			}
		}
	}
	for range 3 {
		v, err := q.run(ctx, c)
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
				t.subs[j].held = v[8+j]
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

// newCall is the admitScript call of n requests (1: an admission, more: a
// lease) of t's subjects at now, each estimated est µ$: the rate keys of
// the minute and the one before, and each budget's counter and hold key.
func newCall(t *Ticket, subs []Subject, now time.Time, est, n int64) *call {
	minute := now.UnixMilli() / windowMS
	c := &call{tag: t.tag, e: now.UnixMilli() % windowMS, est: est, n: n, subs: make([]callSub, len(subs))}
	for i, s := range subs {
		h, cs := &t.subs[i], &c.subs[i]
		cs.rpm, cs.tpm = clampLimit(s.RPM), clampLimit(s.TPM)
		if cs.rpm > 0 || cs.tpm > 0 {
			cur, prev := itoa(minute), itoa(minute-1)
			cs.keys[0], cs.keys[1], cs.keys[2], cs.keys[3] = h.base+"rpm:"+cur, h.base+"rpm:"+prev, h.base+"tpm:"+cur, h.base+"tpm:"+prev
		}
		if h.counter != "" {
			cs.keys[4], cs.keys[5] = h.counter, h.hold
			cs.budget = usd.Micro(s.Budget.USD)
			if s.Budget.Period == budget.Total {
				cs.renew = int64(totalTTL / time.Second)
			}
		}
	}
	return c
}

// run is c's answer from admitScript: through the pipeliner, or in a round
// trip of its own bounded by the call timeout when q has none (tests
// compare both).
func (q *Quota) run(ctx context.Context, c *call) ([]int64, error) {
	if q.pipe != nil {
		return q.pipe.call(ctx, c, q.timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	return runAlone(ctx, q.client, c)
}

// runAlone runs admitScript for c alone.
func runAlone(ctx context.Context, client redis.UniversalClient, c *call) ([]int64, error) {
	calls := []*call{c}
	keys, args := scriptArgs(calls)
	v, err := admitScript.Run(ctx, client, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	a, err := answers(v, calls)
	if err != nil {
		return nil, err
	}
	return a[0], nil
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
