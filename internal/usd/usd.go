// Package usd is the gateway's arithmetic of money: the cost of tokens at a
// price, and sums of integer micro-dollars (budgets). Every function
// saturates instead of overflowing, so that no token count or price, however
// large, makes a cost +Inf, NaN or negative, or a sum wrap: config's
// Price.Cost, the budget ledgers and the usage store all count with it.
package usd

import "math"

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
