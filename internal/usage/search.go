package usage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxSearchLimit bounds SearchQuery.Limit: a page of the request log.
const MaxSearchLimit = 500

// SearchQuery selects a page of the request log, newest first. Every set
// field must match; the zero SearchQuery is the newest entries.
type SearchQuery struct {
	RequestID string // the X-Request-Id the client got back
	KeyID     string // the key's name
	Model     string // the model the client asked for
	Team      string // the key's team; "" matches any
	Status    int    // the HTTP status sent; 0 matches any
	Outcome   string // one of the Outcome constants; "" matches any
	// Text matches an entry whose request id, key or model is Text (the
	// search box of the dashboard: one word, whatever it names).
	Text   string
	Since  time.Time // zero: no lower bound
	Until  time.Time // zero: no upper bound
	Limit  int       // entries per page: 0 means 50, at most MaxSearchLimit
	Offset int       // entries skipped (page × Limit)
}

// searcher is the optional capability of a Store that Search needs.
type searcher interface {
	search(ctx context.Context, q SearchQuery) ([]Entry, error)
	series(ctx context.Context, q SeriesQuery) ([]Bucket, error)
}

var _ searcher = (*sqlStore)(nil)

// Search returns the page of entries q selects, newest first (ties by ID,
// descending). It asks for one entry more than q.Limit; more reports
// whether there was one (another page).
func Search(ctx context.Context, s Store, q SearchQuery) (page []Entry, more bool, err error) {
	r, ok := s.(searcher)
	if !ok {
		return nil, false, fmt.Errorf("usage: search: store %T cannot search", s)
	}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	q.Limit = min(q.Limit, MaxSearchLimit)
	q.Offset = max(q.Offset, 0)
	want := q.Limit
	q.Limit++
	out, err := r.search(ctx, q)
	if err != nil {
		return nil, false, err
	}
	if len(out) > want {
		return out[:want], true, nil
	}
	if out == nil {
		out = []Entry{}
	}
	return out, false, nil
}

func (s *sqlStore) search(ctx context.Context, sq SearchQuery) ([]Entry, error) {
	var q query
	q.b.WriteString("SELECT " + columns + " FROM usage_entries")
	q.where(s.d, Filter{Since: sq.Since, Until: sq.Until, KeyID: sq.KeyID, Model: sq.Model, Team: sq.Team, Outcome: sq.Outcome})
	and := func(cond string) {
		if !strings.Contains(q.b.String(), " WHERE ") {
			q.b.WriteString(" WHERE ")
		} else {
			q.b.WriteString(" AND ")
		}
		q.b.WriteString(cond)
	}
	if sq.RequestID != "" {
		and("request_id = " + q.arg(sq.RequestID))
	}
	if sq.Status != 0 {
		and("status = " + q.arg(sq.Status))
	}
	if sq.Text != "" {
		a := q.arg(sq.Text)
		and("(request_id = " + a + " OR key_id = " + a + " OR model = " + a + ")")
	}
	q.b.WriteString(" ORDER BY arrived_at DESC, id DESC LIMIT " + strconv.Itoa(sq.Limit) + " OFFSET " + strconv.Itoa(sq.Offset))
	rows, err := s.db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, fmt.Errorf("usage: search entries in %s: %w", s.d.name, err)
	}
	return s.scanEntries(rows)
}

// SeriesQuery asks for the ledger's totals per time bucket.
type SeriesQuery struct {
	Since, Until time.Time     // both required
	Step         time.Duration // bucket width, a whole number of seconds ≥ 1 s
	// Savings prices what the prompt cache saved a model's entries of a
	// bucket, as ReportQuery.Savings does; nil: Bucket.SavingsUSD is 0.
	Savings func(model string, cacheRead, cacheWrite int64) float64
}

// Bucket is the total of the entries that arrived in [Start, Start+Step).
type Bucket struct {
	Start        time.Time
	Requests     int64
	Failed       int64 // outcome upstream_error or timeout: the gateway tried and failed
	Rejected     int64 // outcome rejected or untranslatable: refused by the gateway's own checks
	Cancelled    int64 // outcome client_cancelled
	InputTokens  int64
	OutputTokens int64
	CostUSD      float64
	// CacheReadTokens are the part of InputTokens read from a prompt
	// cache; SavingsUSD what the caches saved (SeriesQuery.Savings).
	CacheReadTokens int64
	SavingsUSD      float64
}

// Series totals the entries of [q.Since, q.Until) per bucket of q.Step,
// oldest first; buckets without entries are absent. The query groups by
// bucket and model (a model's price prices its savings), the models of a
// bucket then summed.
func Series(ctx context.Context, s Store, q SeriesQuery) ([]Bucket, error) {
	r, ok := s.(searcher)
	if !ok {
		return nil, fmt.Errorf("usage: series: store %T cannot total by time", s)
	}
	if q.Step < time.Second || q.Since.IsZero() || q.Until.IsZero() || !q.Since.Before(q.Until) {
		return nil, fmt.Errorf("usage: series: want since < until and a step of at least 1s (got %s to %s by %s)",
			q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339), q.Step)
	}
	return r.series(ctx, q)
}

func (s *sqlStore) series(ctx context.Context, sq SeriesQuery) ([]Bucket, error) {
	step := int64(sq.Step / time.Second)
	var q query
	// The bucket as Unix seconds of its start.
	bucket := "(arrived_at / " + strconv.FormatInt(step*1_000_000, 10) + ") * " + strconv.FormatInt(step, 10)
	if s.d == postgresDialect {
		bucket = "CAST(floor(extract(epoch from arrived_at) / " + strconv.FormatInt(step, 10) + ") AS BIGINT) * " + strconv.FormatInt(step, 10)
	}
	up, to, rej, untr, cc := q.arg(OutcomeUpstreamError), q.arg(OutcomeTimeout), q.arg(OutcomeRejected), q.arg(OutcomeUntranslatable), q.arg(OutcomeClientCancelled)
	q.b.WriteString("SELECT " + bucket + ", COUNT(*), " +
		"CAST(SUM(CASE WHEN outcome = " + up + " OR outcome = " + to + " THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN outcome = " + rej + " OR outcome = " + untr + " THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(CASE WHEN outcome = " + cc + " THEN 1 ELSE 0 END) AS BIGINT), " +
		"CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), SUM(cost_usd), " +
		"CAST(SUM(cache_read_tokens) AS BIGINT), CAST(SUM(cache_write_tokens) AS BIGINT), model FROM usage_entries")
	q.where(s.d, Filter{Since: sq.Since, Until: sq.Until})
	q.b.WriteString(" GROUP BY 1, model ORDER BY 1, model")
	rows, err := s.db.QueryContext(ctx, q.b.String(), q.args...)
	if err != nil {
		return nil, fmt.Errorf("usage: series from %s: %w", s.d.name, err)
	}
	defer rows.Close()
	out := []Bucket{}
	for rows.Next() {
		var b Bucket
		var start, write int64
		var model string
		if err := rows.Scan(&start, &b.Requests, &b.Failed, &b.Rejected, &b.Cancelled, &b.InputTokens, &b.OutputTokens, &b.CostUSD,
			&b.CacheReadTokens, &write, &model); err != nil {
			return nil, fmt.Errorf("usage: series from %s: %w", s.d.name, err)
		}
		b.Start = time.Unix(start, 0).UTC()
		if sq.Savings != nil && (b.CacheReadTokens > 0 || write > 0) {
			b.SavingsUSD = sq.Savings(model, b.CacheReadTokens, write)
		}
		if n := len(out); n > 0 && out[n-1].Start.Equal(b.Start) {
			o := &out[n-1]
			o.Requests += b.Requests
			o.Failed += b.Failed
			o.Rejected += b.Rejected
			o.Cancelled += b.Cancelled
			o.InputTokens += b.InputTokens
			o.OutputTokens += b.OutputTokens
			o.CostUSD += b.CostUSD
			o.CacheReadTokens += b.CacheReadTokens
			o.SavingsUSD += b.SavingsUSD
			continue
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage: series from %s: %w", s.d.name, err)
	}
	return out, nil
}
