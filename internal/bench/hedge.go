package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// HedgeIdeal is the first-token time an ideal hedge would give, computed
// from an unhedged run's own first-token times, next to what the run
// measured (bench --hedge-ideal-from). The ideal hedge starts the backup
// exactly after after from the send, for every request whose first token
// is later, and costs nothing: each request's TTFT is min(X₁, after + X₂)
// with X₁ and X₂ drawn independently from the unhedged run's TTFTs. When
// more than budget of the requests are that late, only budget × requests
// backups are allowed: each late request gets one with probability
// budget / (its share of late requests). Draws are seeded (--seed), so the
// figure is reproducible.
type HedgeIdeal struct {
	From    string  `json:"from"`     // the unhedged run's requests (--requests-out JSONL)
	Samples int     `json:"samples"`  // its first-token times resampled
	AfterMs float64 `json:"after_ms"` // the hedge's delay
	Budget  float64 `json:"budget"`   // backups per request at most
	// LateShare is the share of the samples later than after: the backups
	// per request an ideal hedge sends (at most Budget).
	LateShare float64 `json:"late_share"`
	TTFTP50Ms float64 `json:"ttft_p50_ms"`
	TTFTP99Ms float64 `json:"ttft_p99_ms"`
	// Ratio is the run's TTFT p99 over the ideal's: 1 is as good as a
	// hedge can be, above 1 what the hedge lost on the way.
	Ratio float64 `json:"ratio"`
}

// hedgeDraws is how many requests the ideal resamples.
const hedgeDraws = 200_000

// IdealHedge resamples samples (TTFTs in ms, any order) as HedgeIdeal
// says, with seed; it returns the ideal's p50 and p99 (the run's
// percentile rule) and the samples' share later than after. It needs at
// least one sample.
func IdealHedge(samples []float64, after time.Duration, budget float64, seed uint64) (p50, p99, late float64) {
	a := ms(after)
	n := 0
	for _, x := range samples {
		if x > a {
			n++
		}
	}
	late = float64(n) / float64(len(samples))
	q := 1.0 // the chance a late request gets its backup
	if late > budget {
		q = budget / late
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x6865646765)) // "hedge"
	ideal := make([]float64, hedgeDraws)
	for i := range ideal {
		x := samples[rng.IntN(len(samples))]
		if x > a && (q == 1 || rng.Float64() < q) {
			x = math.Min(x, a+samples[rng.IntN(len(samples))])
		}
		ideal[i] = x
	}
	slices.Sort(ideal)
	return percentileSorted(ideal, 50), percentileSorted(ideal, 99), late
}

// ReadTTFTs reads the first-token times (ms) of the successful requests
// in a --requests-out file.
func ReadTTFTs(r io.Reader) ([]float64, error) {
	var xs []float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		var l struct {
			OK   bool     `json:"ok"`
			TTFT *float64 `json:"ttft_ms"`
		}
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if l.OK && l.TTFT != nil {
			xs = append(xs, *l.TTFT)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(xs) == 0 {
		return nil, fmt.Errorf("no successful request with a first token")
	}
	return xs, nil
}

// SetHedgeIdeal computes the ideal from samples once and sets it, with
// each run's ratio, on every run of res.
func SetHedgeIdeal(res *Result, from string, samples []float64, after time.Duration, budget float64, seed uint64) {
	p50, p99, late := IdealHedge(samples, after, budget, seed)
	for i := range res.Runs {
		r := &res.Runs[i]
		h := &HedgeIdeal{From: from, Samples: len(samples), AfterMs: ms(after), Budget: budget, LateShare: late, TTFTP50Ms: p50, TTFTP99Ms: p99}
		if p99 > 0 && r.TTFT.N > 0 {
			h.Ratio = r.TTFT.P99 / p99
		}
		r.HedgeIdeal = h
	}
}

// WriteHedgeIdeal prints one line per run that has a HedgeIdeal.
func WriteHedgeIdeal(w io.Writer, runs ...RunResult) error {
	for _, r := range runs {
		h := r.HedgeIdeal
		if h == nil {
			continue
		}
		name := r.Model
		if r.Label != "" {
			name = r.Label
		}
		if _, err := fmt.Fprintf(w, "hedge ideal (after %g ms, budget %g, from %d unhedged first tokens, %.1f%% late): TTFT p99 %.0f ms; %s measured %.0f ms: %.2fx\n",
			h.AfterMs, h.Budget, h.Samples, h.LateShare*100, h.TTFTP99Ms, name, r.TTFT.P99, h.Ratio); err != nil {
			return err
		}
	}
	return nil
}
