package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// scrape reads a Prometheus text endpoint into series → value, keyed by the
// series as written ("name{labels}").
func scrape(ctx context.Context, cl *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: status %d", url, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the last space outside the labels; a timestamp may follow it.
		end := strings.LastIndexByte(line, '}')
		rest := line
		if end >= 0 {
			rest = line[end+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			end = i - 1
			rest = line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[line[:end+1]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return out, nil
}

// serverStats compares two scrapes: the GC pause max of the run (the
// highest bucket of the pause histogram that grew), GC cycles, and the mean
// gateway overhead per stage. A figure whose series is missing from either
// scrape is not measured (nil).
func serverStats(before, after map[string]float64) *ServerStats {
	s := &ServerStats{}
	for _, name := range []string{"streamgate_gc_pause_seconds", "go_sched_pauses_total_gc_seconds", "go_gc_pauses_seconds"} {
		if m, ok := histMaxDelta(before, after, name); ok {
			ms := m * 1000
			s.GCPauseMaxMs = &ms
			break
		}
	}
	// go_gc_duration_seconds{quantile="1"} is not a fallback: the summary's
	// max covers the runtime's recent pauses, not the run's.
	for _, k := range []string{"go_gc_cycles_total_gc_cycles_total", "go_gc_duration_seconds_count"} {
		a, okA := after[k]
		b, okB := before[k]
		if okA && okB {
			n := a - b
			s.GCCycles = &n
			break
		}
	}
	const ov = "streamgate_gateway_overhead_seconds"
	sums, counts := map[string]float64{}, map[string]float64{}
	for k, sum := range after {
		if !strings.HasPrefix(k, ov+"_sum{") {
			continue
		}
		labels := k[len(ov+"_sum"):]
		stage := labelValue(labels, "stage")
		if stage == "" {
			continue
		}
		// Series of one stage (per model and route) pool into one mean.
		sums[stage] += sum - before[k]
		counts[stage] += after[ov+"_count"+labels] - before[ov+"_count"+labels]
	}
	for stage, n := range counts {
		if n > 0 {
			if s.OverheadMs == nil {
				s.OverheadMs = map[string]float64{}
			}
			s.OverheadMs[stage] = sums[stage] / n * 1000
		}
	}
	return s
}

func labelValue(labels, name string) string {
	i := strings.Index(labels, name+`="`)
	if i < 0 {
		return ""
	}
	rest := labels[i+len(name)+2:]
	j := strings.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// histMaxDelta returns the upper bound of the highest bucket of histogram
// name whose count grew between the scrapes (0 when none grew); ok is false
// when a bucket of it is missing from either scrape.
func histMaxDelta(before, after map[string]float64, name string) (float64, bool) {
	type bucket struct{ le, delta float64 }
	var bs []bucket
	prefix := name + "_bucket{"
	for k, v := range after {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le := labelValue(k[len(name+"_bucket"):], "le")
		f, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		b, ok := before[k]
		if !ok {
			return 0, false // its growth over the run is unknown
		}
		bs = append(bs, bucket{f, v - b})
	}
	if len(bs) == 0 {
		return 0, false
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	// Buckets are cumulative: the max lies in the first bucket that holds every new sample.
	total := bs[len(bs)-1].delta
	if total <= 0 {
		return 0, true
	}
	for i, b := range bs {
		if b.delta >= total {
			if math.IsInf(b.le, 1) && i > 0 {
				return bs[i-1].le, true
			}
			return b.le, true
		}
	}
	return 0, true
}
