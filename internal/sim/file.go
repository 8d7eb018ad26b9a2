package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// A profiles file (streamgate sim --profiles FILE) is YAML:
//
//	profiles:
//	  - name: gpt-4o                # the model name that selects it
//	    source: "what the figures come from"
//	    ttft: 300ms                 # a median (lognormal with ttft_p99), or
//	    ttft_p99: 1s
//	    ttft: {quantiles: {p0: 80ms, p50: 300ms, p90: 700ms, p99: 2s, p100: 5s}}
//	    ttft: {histogram: {le: [100ms, 250ms, 500ms, 1s, +Inf], counts: [3, 40, 81, 97, 100]}}
//	    itl: 20ms                   # a mean gap (lognormal with itl_jitter), or a table as ttft
//	    itl_jitter: 0.3
//	    prefill_per_token: 50us
//	    tokens: 200                 # output length, or {quantiles: {p0: 10, p50: 180, p100: 900}}
//	    tokens_per_chunk: 4         # or {weights: {1: 0.2, 4: 0.5, 8: 0.3}}
//	    hourly: [1, 1, ..., 1.4]    # 24 multipliers of every wait, by UTC hour
//	    lang: en
//	    reasoning: false
//	    thinking_tokens: 64
//	    cache_min_tokens: 1024
//	    input_price: 2.5            # USD per 1M tokens
//	    output_price: 10
//	    faults: {fail_status: 503, fail_rate: 0.02, cut_rate: 0.01, error_rate: 0.005,
//	             stall_first: 10s, stall_first_rate: 0, stall_at: 0, stall_for: 10s,
//	             stall_rate: 0, cut_at: 0, error_at: 0, malformed_at: 0, malformed_rate: 0}
//	default: gpt-4o                 # optional: the profile of models without one
//
// Quantile keys are percentiles (p0, p50, p99.9, p100); p0 and p100 are
// required. Histogram counts are cumulative, as Prometheus exposes them.
// Unknown keys are errors, as are values out of range (Profile.Validate).

// MaxProfilesFileBytes bounds a profiles file.
const MaxProfilesFileBytes = 8 << 20

// ProfilesFile is the content of a profiles file.
type ProfilesFile struct {
	Profiles []Profile
	// Default names the profile of models without one; "" = none.
	Default string
}

// ReadProfiles reads a profiles file (see the format above). The error
// names the profile and the field at fault.
func ReadProfiles(r io.Reader) (*ProfilesFile, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxProfilesFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxProfilesFileBytes {
		return nil, fmt.Errorf("profiles file larger than %d bytes", MaxProfilesFileBytes)
	}
	var raw struct {
		Profiles []fileProfile `yaml:"profiles"`
		Default  string        `yaml:"default"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("profiles file is empty: want a profiles: list")
		}
		return nil, fmt.Errorf("profiles file: %w", err)
	}
	if len(raw.Profiles) == 0 {
		return nil, errors.New("profiles file: no profiles (want a profiles: list)")
	}
	out := &ProfilesFile{Default: raw.Default}
	var errs []error
	seen := map[string]bool{}
	for i, fp := range raw.Profiles {
		p, err := fp.profile()
		if err != nil {
			errs = append(errs, fmt.Errorf("profiles[%d] %q: %w", i, fp.Name, err))
			continue
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("profiles[%d]: name %q repeated", i, p.Name))
		}
		seen[p.Name] = true
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
		out.Profiles = append(out.Profiles, p)
	}
	if raw.Default != "" && !seen[raw.Default] {
		errs = append(errs, fmt.Errorf("default: %q is not a profile of the file", raw.Default))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

type fileProfile struct {
	Name            string      `yaml:"name"`
	Source          string      `yaml:"source"`
	TTFT            *distSpec   `yaml:"ttft"`
	TTFTP99         *string     `yaml:"ttft_p99"`
	ITL             *distSpec   `yaml:"itl"`
	ITLJitter       *float64    `yaml:"itl_jitter"`
	PrefillPerToken *string     `yaml:"prefill_per_token"`
	Tokens          *distSpec   `yaml:"tokens"`
	TokensPerChunk  *chunkSpec  `yaml:"tokens_per_chunk"`
	Hourly          []float64   `yaml:"hourly"`
	Lang            string      `yaml:"lang"`
	Reasoning       bool        `yaml:"reasoning"`
	ThinkingTokens  int         `yaml:"thinking_tokens"`
	CacheMinTokens  int         `yaml:"cache_min_tokens"`
	InputPrice      float64     `yaml:"input_price"`
	OutputPrice     float64     `yaml:"output_price"`
	Faults          *fileFaults `yaml:"faults"`
}

type fileFaults struct {
	FailStatus     int     `yaml:"fail_status"`
	FailRate       float64 `yaml:"fail_rate"`
	StallFirst     string  `yaml:"stall_first"`
	StallFirstRate float64 `yaml:"stall_first_rate"`
	StallAt        int     `yaml:"stall_at"`
	StallFor       string  `yaml:"stall_for"`
	StallRate      float64 `yaml:"stall_rate"`
	CutAt          int     `yaml:"cut_at"`
	CutRate        float64 `yaml:"cut_rate"`
	ErrorAt        int     `yaml:"error_at"`
	ErrorRate      float64 `yaml:"error_rate"`
	MalformedAt    int     `yaml:"malformed_at"`
	MalformedRate  float64 `yaml:"malformed_rate"`
}

// distSpec is a scalar, {quantiles: {pN: v}} or {histogram: {le, counts}},
// kept as text until its unit is known.
type distSpec struct {
	scalar    string
	quantiles map[string]string
	le        []string
	counts    []float64
}

func (d *distSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		d.scalar = n.Value
		return nil
	}
	var m struct {
		Quantiles map[string]string `yaml:"quantiles"`
		Histogram *struct {
			Le     []string  `yaml:"le"`
			Counts []float64 `yaml:"counts"`
		} `yaml:"histogram"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	switch {
	case m.Quantiles != nil && m.Histogram != nil:
		return fmt.Errorf("line %d: quantiles and histogram exclude each other", n.Line)
	case m.Quantiles != nil:
		d.quantiles = m.Quantiles
	case m.Histogram != nil:
		d.le, d.counts = m.Histogram.Le, m.Histogram.Counts
	default:
		return fmt.Errorf("line %d: want a value, {quantiles: {...}} or {histogram: {le: [...], counts: [...]}}", n.Line)
	}
	return nil
}

// dist builds the distribution with parse reading one value (its unit);
// a scalar returns nil and the scalar's value.
func (d *distSpec) dist(parse func(string) (float64, error)) (*Dist, float64, error) {
	if d.quantiles == nil && d.le == nil {
		v, err := parse(d.scalar)
		return nil, v, err
	}
	if d.quantiles != nil {
		q := make(map[float64]float64, len(d.quantiles))
		for k, s := range d.quantiles {
			pct, ok := strings.CutPrefix(k, "p")
			f, err := strconv.ParseFloat(pct, 64)
			if !ok || err != nil || !(f >= 0 && f <= 100) {
				return nil, 0, fmt.Errorf("quantile %q: want p0 to p100 (p50, p99.9)", k)
			}
			v, err := parse(s)
			if err != nil {
				return nil, 0, fmt.Errorf("%s: %w", k, err)
			}
			q[f/100] = v
		}
		dd, err := NewQuantileDist(q)
		return dd, 0, err
	}
	le := make([]float64, len(d.le))
	for i, s := range d.le {
		if s == "+Inf" || s == "Inf" || s == "inf" {
			le[i] = math.Inf(1)
			continue
		}
		v, err := parse(s)
		if err != nil {
			return nil, 0, fmt.Errorf("le[%d]: %w", i, err)
		}
		le[i] = v
	}
	dd, err := NewHistogramDist(le, d.counts)
	return dd, 0, err
}

// chunkSpec is a count or {weights: {n: w}}.
type chunkSpec struct {
	n int
	w map[int]float64
}

func (c *chunkSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&c.n)
	}
	var m struct {
		Weights map[int]float64 `yaml:"weights"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	if m.Weights == nil {
		return fmt.Errorf("line %d: want a count or {weights: {1: 0.2, 4: 0.8}}", n.Line)
	}
	c.w = m.Weights
	return nil
}

func parseDurNS(s string) (float64, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a non-negative duration like 250ms", s)
	}
	return float64(d), nil
}

func parseCount(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number >= 0", s)
	}
	return f, nil
}

func (fp *fileProfile) profile() (Profile, error) {
	if fp.Name == "" {
		return Profile{}, errors.New("name: missing")
	}
	p := DefaultProfile()
	p.Name, p.Source = fp.Name, fp.Source
	var errs []error
	field := func(name string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if fp.TTFT != nil {
		d, v, err := fp.TTFT.dist(parseDurNS)
		field("ttft", err)
		if d != nil {
			p.TTFTDist = d
			p.TTFT, p.TTFTP99 = time.Duration(d.Quantile(0.5)), time.Duration(d.Quantile(0.99))
		} else {
			p.TTFT = time.Duration(v)
			p.TTFTP99 = max(p.TTFT, p.TTFTP99)
			if fp.TTFTP99 == nil {
				p.TTFTP99 = p.TTFT
			}
		}
	}
	if fp.TTFTP99 != nil {
		v, err := parseDurNS(*fp.TTFTP99)
		field("ttft_p99", err)
		if p.TTFTDist != nil {
			field("ttft_p99", errors.New("set with a ttft table (the table has its own tail)"))
		}
		p.TTFTP99 = time.Duration(v)
	}
	if fp.ITL != nil {
		d, v, err := fp.ITL.dist(parseDurNS)
		field("itl", err)
		p.ITLDist, p.ITL = d, time.Duration(v)
		if d != nil {
			p.ITL, p.ITLJitter = 0, 0
		}
	}
	if fp.ITLJitter != nil {
		if p.ITLDist != nil {
			field("itl_jitter", errors.New("set with an itl table"))
		}
		p.ITLJitter = *fp.ITLJitter
	}
	if fp.PrefillPerToken != nil {
		v, err := parseDurNS(*fp.PrefillPerToken)
		field("prefill_per_token", err)
		p.PrefillPerToken = time.Duration(v)
	}
	if fp.Tokens != nil {
		d, v, err := fp.Tokens.dist(parseCount)
		field("tokens", err)
		p.TokensDist = d
		if d == nil {
			if v < 1 || v != math.Trunc(v) {
				field("tokens", fmt.Errorf("%g: want a whole number >= 1", v))
			}
			p.Tokens = int(v)
		}
	}
	if c := fp.TokensPerChunk; c != nil {
		if c.w != nil {
			w, err := NewWeights(c.w)
			field("tokens_per_chunk", err)
			p.ChunkDist = w
		} else {
			if c.n < 1 {
				field("tokens_per_chunk", fmt.Errorf("%d: want 1 or more", c.n))
			}
			p.TokensPerChunk = c.n
		}
	}
	if fp.Hourly != nil {
		if len(fp.Hourly) != 24 {
			field("hourly", fmt.Errorf("%d multipliers: want 24, one per UTC hour from 00", len(fp.Hourly)))
		} else {
			var h [24]float64
			copy(h[:], fp.Hourly)
			p.Hourly = &h
		}
	}
	if fp.Lang != "" {
		p.Lang = fp.Lang
	}
	p.Reasoning, p.ThinkingTokens, p.CacheMinTokens = fp.Reasoning, fp.ThinkingTokens, fp.CacheMinTokens
	p.InputPrice, p.OutputPrice = fp.InputPrice, fp.OutputPrice
	if f := fp.Faults; f != nil {
		p.Faults = Faults{FailStatus: f.FailStatus, FailRate: f.FailRate, StallFirstRate: f.StallFirstRate,
			StallAt: f.StallAt, StallRate: f.StallRate, CutAt: f.CutAt, CutRate: f.CutRate,
			ErrorAt: f.ErrorAt, ErrorRate: f.ErrorRate, MalformedAt: f.MalformedAt, MalformedRate: f.MalformedRate}
		for _, d := range []struct {
			name, v string
			dst     *time.Duration
		}{{"faults.stall_first", f.StallFirst, &p.Faults.StallFirst}, {"faults.stall_for", f.StallFor, &p.Faults.StallFor}} {
			if d.v != "" {
				v, err := parseDurNS(d.v)
				field(d.name, err)
				*d.dst = time.Duration(v)
			}
		}
	}
	return p, errors.Join(errs...)
}

// WriteProfiles writes profiles in the file format ReadProfiles reads,
// after the comment lines of header (each gets "# "). Distributions are
// written as quantile tables, durations to the microsecond.
func WriteProfiles(w io.Writer, header []string, profiles []Profile, def string) error {
	var b strings.Builder
	for _, h := range header {
		b.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
	b.WriteString("profiles:\n")
	for _, p := range profiles {
		fmt.Fprintf(&b, "  - name: %s\n", yamlString(p.Name))
		if p.Source != "" {
			fmt.Fprintf(&b, "    source: %s\n", yamlString(p.Source))
		}
		if p.TTFTDist != nil {
			writeDist(&b, "ttft", p.TTFTDist, fmtDur)
		} else {
			fmt.Fprintf(&b, "    ttft: %s\n    ttft_p99: %s\n", p.TTFT, p.TTFTP99)
		}
		if p.ITLDist != nil {
			writeDist(&b, "itl", p.ITLDist, fmtDur)
		} else {
			fmt.Fprintf(&b, "    itl: %s\n    itl_jitter: %g\n", p.ITL, p.ITLJitter)
		}
		if p.PrefillPerToken != 0 {
			fmt.Fprintf(&b, "    prefill_per_token: %s\n", p.PrefillPerToken)
		}
		if p.TokensDist != nil {
			writeDist(&b, "tokens", p.TokensDist, func(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) })
		} else if p.Tokens != 0 {
			fmt.Fprintf(&b, "    tokens: %d\n", p.Tokens)
		}
		if p.ChunkDist != nil {
			t := p.ChunkDist.Table()
			ns := make([]int, 0, len(t))
			for n := range t {
				ns = append(ns, n)
			}
			slices.Sort(ns)
			b.WriteString("    tokens_per_chunk:\n      weights:\n")
			for _, n := range ns {
				fmt.Fprintf(&b, "        %d: %s\n", n, strconv.FormatFloat(t[n], 'g', 6, 64))
			}
		} else if p.TokensPerChunk != 0 {
			fmt.Fprintf(&b, "    tokens_per_chunk: %d\n", p.TokensPerChunk)
		}
		if p.Hourly != nil {
			parts := make([]string, 24)
			for i, m := range p.Hourly {
				parts[i] = strconv.FormatFloat(m, 'g', 4, 64)
			}
			fmt.Fprintf(&b, "    hourly: [%s]\n", strings.Join(parts, ", "))
		}
		if p.Lang != "" {
			fmt.Fprintf(&b, "    lang: %s\n", p.Lang)
		}
		if p.Reasoning {
			b.WriteString("    reasoning: true\n")
		}
		if p.ThinkingTokens != 0 {
			fmt.Fprintf(&b, "    thinking_tokens: %d\n", p.ThinkingTokens)
		}
		if p.CacheMinTokens != 0 {
			fmt.Fprintf(&b, "    cache_min_tokens: %d\n", p.CacheMinTokens)
		}
		if p.InputPrice != 0 || p.OutputPrice != 0 {
			fmt.Fprintf(&b, "    input_price: %g\n    output_price: %g\n", p.InputPrice, p.OutputPrice)
		}
		if f := p.Faults; f != (Faults{}) {
			b.WriteString("    faults:\n")
			for _, kv := range []struct {
				k string
				v any
				z bool
			}{
				{"fail_status", f.FailStatus, f.FailStatus == 0}, {"fail_rate", f.FailRate, f.FailRate == 0},
				{"stall_first", f.StallFirst, f.StallFirst == 0}, {"stall_first_rate", f.StallFirstRate, f.StallFirstRate == 0},
				{"stall_at", f.StallAt, f.StallAt == 0}, {"stall_for", f.StallFor, f.StallFor == 0}, {"stall_rate", f.StallRate, f.StallRate == 0},
				{"cut_at", f.CutAt, f.CutAt == 0}, {"cut_rate", f.CutRate, f.CutRate == 0},
				{"error_at", f.ErrorAt, f.ErrorAt == 0}, {"error_rate", f.ErrorRate, f.ErrorRate == 0},
				{"malformed_at", f.MalformedAt, f.MalformedAt == 0}, {"malformed_rate", f.MalformedRate, f.MalformedRate == 0},
			} {
				if !kv.z {
					fmt.Fprintf(&b, "      %s: %v\n", kv.k, kv.v)
				}
			}
		}
	}
	if def != "" {
		fmt.Fprintf(&b, "default: %s\n", yamlString(def))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDist writes a quantile table, one point a line.
func writeDist(b *strings.Builder, key string, d *Dist, format func(float64) string) {
	fmt.Fprintf(b, "    %s:\n      quantiles:\n", key)
	for i := range d.p {
		fmt.Fprintf(b, "        p%s: %s\n", pctName(d.p[i]), format(d.v[i]))
	}
}

// fmtDur writes nanoseconds as a Go duration to the microsecond.
func fmtDur(v float64) string {
	return time.Duration(v).Round(time.Microsecond).String()
}

// yamlString quotes s when YAML would not read it back as the same string.
func yamlString(s string) string {
	var v string
	if err := yaml.Unmarshal([]byte(s), &v); err == nil && v == s && !strings.ContainsAny(s, "#:\n{}[],&*!|>'\"%@`") {
		return s
	}
	return strconv.Quote(s)
}
