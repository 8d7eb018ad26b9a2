package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSLO reads "--goodput" objectives: comma-separated KEY:MS pairs with
// keys ttft, itl (the request's mean gap), tpot, e2e and gap (the request's
// largest gap), e.g. "ttft:500,itl:50,e2e:10000". Empty gives the zero SLO.
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	if strings.TrimSpace(s) == "" {
		return slo, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || f <= 0 {
			return SLO{}, fmt.Errorf("goodput %q: want KEY:MILLISECONDS with a positive number", part)
		}
		d := time.Duration(f * float64(time.Millisecond))
		switch k {
		case "ttft":
			slo.TTFT = d
		case "itl":
			slo.ITL = d
		case "tpot":
			slo.TPOT = d
		case "e2e":
			slo.E2E = d
		case "gap", "max_gap":
			slo.MaxGap = d
		default:
			return SLO{}, fmt.Errorf("goodput %q: unknown objective %q (want ttft, itl, tpot, e2e or gap)", part, k)
		}
	}
	return slo, nil
}

// String formats the SLO as ParseSLO reads it.
func (s SLO) String() string {
	var parts []string
	add := func(k string, d time.Duration) {
		if d > 0 {
			parts = append(parts, k+":"+strconv.FormatFloat(ms(d), 'g', -1, 64))
		}
	}
	add("ttft", s.TTFT)
	add("itl", s.ITL)
	add("tpot", s.TPOT)
	add("e2e", s.E2E)
	add("gap", s.MaxGap)
	return strings.Join(parts, ",")
}
