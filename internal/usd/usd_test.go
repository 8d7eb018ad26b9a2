package usd

import (
	"math"
	"testing"
)

func TestCost(t *testing.T) {
	inf, huge := math.Inf(1), math.MaxFloat64
	tests := []struct {
		name     string
		in       int64
		inPrice  float64
		out      int64
		outPrice float64
		want     float64
	}{
		{"plain", 1_000_000, 2, 500_000, 8, 6},
		{"sum divided once", 5, 1, 5, 2, 0.000015}, // (5·1 + 5·2)/1e6; 5e-6 + 1e-5 is 1.4999999999999999e-05
		{"no tokens", 0, 2, 0, 8, 0},
		{"negative tokens", math.MinInt64, 2, 1_000_000, 8, 8},
		{"MaxInt64 tokens", math.MaxInt64, 2, math.MaxInt64, 8, Max},
		{"MaxInt64 output tokens at $2", 0, 0, math.MaxInt64, 2, Max},
		{"largest price", 1, huge, 1, huge, Max},
		{"largest price, MaxInt64 tokens", math.MaxInt64, huge, math.MaxInt64, huge, Max},
		{"+Inf price", 1, inf, 0, 8, Max},
		{"+Inf price, no tokens", 0, inf, 0, inf, 0},
		{"NaN price", 1_000_000, math.NaN(), 1_000_000, 8, 8},
		{"negative price", 1_000_000, -2, 1_000_000, 8, 8},
		{"-Inf price", 1_000_000, math.Inf(-1), 0, 8, 0},
		{"free", 1_000_000, 0, 1_000_000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Cost(tt.in, tt.inPrice, tt.out, tt.outPrice); got != tt.want {
				t.Errorf("Cost(%d, %v, %d, %v): got %v, want %v", tt.in, tt.inPrice, tt.out, tt.outPrice, got, tt.want)
			}
		})
	}
}

func TestMicro(t *testing.T) {
	tests := []struct {
		usd  float64
		want int64
	}{
		{0, 0},
		{0.1, 100_000},
		{1.2345675, 1_234_568}, // rounded to the nearest
		{4e-7, 0},
		{5e-7, 1},
		{math.SmallestNonzeroFloat64, 0},
		{Max, MaxMicro},
		{2 * Max, MaxMicro},
		{math.MaxFloat64, MaxMicro},
		{math.Inf(1), MaxMicro},
		{math.NaN(), 0},
		{-1, 0},
		{math.Inf(-1), 0},
	}
	for _, tt := range tests {
		if got := Micro(tt.usd); got != tt.want {
			t.Errorf("Micro(%v): got %d, want %d", tt.usd, got, tt.want)
		}
	}
}

func TestAdd(t *testing.T) {
	tests := []struct {
		name       string
		a, b, want int64
	}{
		{"plain", 2, 3, 5},
		{"take away", 5, -3, 2},
		{"to the top", MaxSum - 1, 1, MaxSum},
		{"past the top", MaxSum, MaxMicro, MaxSum},
		{"top plus top", MaxSum, MaxSum, MaxSum},
		{"below zero", 3, -5, 0},
		{"bottom minus top", 0, -MaxSum, 0},
		{"saturated minus one amount stays above every budget", MaxSum, -MaxMicro, MaxSum - MaxMicro},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Add(tt.a, tt.b); got != tt.want {
				t.Errorf("Add(%d, %d): got %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
	if MaxSum-MaxMicro <= MaxMicro {
		t.Errorf("MaxSum − MaxMicro = %d, want above MaxMicro %d", MaxSum-MaxMicro, MaxMicro)
	}
}

// TestAddMany: 10,000 additions of the largest amount saturate; the same
// in plain int64 would wrap (10,000 × 1e15 > MaxInt64).
func TestAddMany(t *testing.T) {
	var s int64
	for range 10_000 {
		s = Add(s, MaxMicro)
	}
	if s != MaxSum {
		t.Fatalf("got %d, want %d", s, int64(MaxSum))
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		x    float64
		want string
	}{
		{0, "$0.00"},
		{50, "$50.00"},
		{3.4712, "$3.47"},
		{1234.5, "$1234.50"},
		{1, "$1.00"},
		{0.999, "$0.999"},
		{0.5, "$0.50"},
		{0.123456, "$0.123"},
		{0.1, "$0.10"},
		{0.01, "$0.01"},
		{0.0123, "$0.0123"},
		{0.002, "$0.002"},
		{0.00213, "$0.00213"},
		{0.009999, "$0.01"},
		{0.00999, "$0.00999"},
		{0.000123456, "$0.000123"},
		{0.00000123, "$0.000001"},
		{0.00000051, "$0.000001"},
		{0.0000004, "<$0.000001"},
		{-0.002, "-$0.002"},
		{Max, "$1000000000.00"},
		{math.NaN(), "$NaN"},
	}
	for _, tt := range tests {
		if got := Format(tt.x); got != tt.want {
			t.Errorf("Format(%v): got %q, want %q", tt.x, got, tt.want)
		}
	}
	if got := Figure(0.002); got != "0.002" {
		t.Errorf("Figure(0.002): got %q, want 0.002", got)
	}
}
