// Package usd is the gateway's arithmetic of money: the cost of tokens at a
// price, sums of integer micro-dollars (budgets), and the one way an amount
// is written for people (Format, Figure). Every function
// saturates instead of overflowing, so that no token count or price, however
// large, makes a cost +Inf, NaN or negative, or a sum wrap: config's
// Price.Cost, the budget ledgers and the usage store all count with it.
package usd

import (
	"math"
	"strconv"
	"strings"
)

const (
	// Max is the largest amount counted, in USD ($1e9): a single cost,
	// estimate or budget above it counts as Max.
	Max = 1e9
	// MicroPerUSD is the unit of sums: one micro-dollar.
	MicroPerUSD = 1_000_000
	// MaxMicro is Max in micro-dollars (1e15).
	MaxMicro = int64(Max) * MicroPerUSD
	// MaxSum is the largest sum of micro-dollars (2^53 − 1, about $9e9): exact
	// in a float64, as in Redis's Lua, and more than MaxMicro above MaxMicro,
	// so a sum that saturated still exceeds every budget after any one
	// amount is taken from it.
	MaxSum = 1<<53 - 1
)

// Clamp returns x in [0, Max]: NaN and negatives are 0, anything above Max
// (+Inf included) is Max.
func Clamp(x float64) float64 {
	if !(x > 0) {
		return 0
	}
	return min(x, Max)
}

// Cost returns the USD cost of in tokens at inPrice and out tokens at
// outPrice (USD per 1M tokens), (in·inPrice + out·outPrice) / 1e6, in
// [0, Max]: a count ≤ 0 or a price that is not positive (NaN included) adds
// nothing, and a cost past Max (+Inf included) is Max.
func Cost(in int64, inPrice float64, out int64, outPrice float64) float64 {
	return Clamp((At(in, inPrice) + At(out, outPrice)) / 1e6)
}

// At is tokens·price (USD per 1M tokens, not yet divided), or 0 when either
// is not positive: never NaN or negative, at most +Inf; a sum of them
// divided by 1e6 and Clamped is a cost.
func At(tokens int64, price float64) float64 {
	if tokens <= 0 || !(price > 0) {
		return 0
	}
	return float64(tokens) * price
}

// Micro converts USD to micro-dollars, rounded to the nearest, in
// [0, MaxMicro] (Clamp first).
func Micro(x float64) int64 {
	return int64(math.Round(Clamp(x) * MicroPerUSD))
}

// FromMicro converts micro-dollars to USD.
func FromMicro(m int64) float64 { return float64(m) / MicroPerUSD }

// Add returns a + b in [0, MaxSum]: a sum past MaxSum is MaxSum, one below 0
// is 0. a and b may be negative (b = −x takes x away) but must each lie in
// [−MaxSum, MaxSum], as every amount and sum of this package does, so the
// addition itself cannot overflow.
func Add(a, b int64) int64 {
	return min(max(a+b, 0), MaxSum)
}

// Format writes an amount of USD for people, the one money format of
// messages, CLI tables and reports: "$" and Figure(x), such as "$50.00",
// "$3.47", "$0.50", "$0.002", "$0.0123", "$0.000001" or "<$0.000001".
func Format(x float64) string {
	f := Figure(x)
	if rest, ok := strings.CutPrefix(f, "-"); ok {
		return "-$" + rest
	}
	if rest, ok := strings.CutPrefix(f, "<"); ok {
		return "<$" + rest
	}
	return "$" + f
}

// Figure writes an amount of USD without the "$", for a column headed USD:
// at least 2 decimals, and below $1 as many as 3 significant digits need, at
// most 6 (a micro-dollar, the unit of budgets), zeros past the second
// decimal dropped. So an amount is never shown as less than it is by more
// than half its last digit, and a nonzero one never as 0: 50 is "50.00",
// 3.4712 "3.47", 0.5 "0.50", 0.123456 "0.123", 0.002 "0.002", 0.0123
// "0.0123", 0.00000123 "0.000001", and a positive amount below half a
// micro-dollar "<0.000001". 0 is "0.00"; a negative amount is its absolute
// value's figure after "-"; NaN and ±Inf are "NaN", "+Inf" and "-Inf".
func Figure(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 0):
		return strconv.FormatFloat(x, 'f', -1, 64)
	case x < 0:
		return "-" + Figure(-x)
	case x == 0:
		return "0.00"
	}
	dec := 2
	if x < 1 {
		// 3 significant digits: 0.1 ≤ x < 1 needs 3 decimals, 0.01 ≤ x < 0.1 4, …
		dec = min(6, 2-int(math.Floor(math.Log10(x))))
	}
	s := strconv.FormatFloat(x, 'f', dec, 64)
	dot := strings.IndexByte(s, '.')
	for len(s)-dot-1 > 2 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s == "0.00" { // below half a micro-dollar
		return "<0.000001"
	}
	return s
}
