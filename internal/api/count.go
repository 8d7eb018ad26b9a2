package api

// CountLimit bounds the token counts read from an upstream's usage: a count
// is valid when it is an integer n with 0 ≤ n < CountLimit (10^8, ten
// times the largest context window offered today, 10M tokens). Every
// dialect's usage is read by this one rule (Count, TokenCount): a count
// that breaks it, whether negative, fractional (1.5), a string ("12"), a
// boolean, an object or an array, or out of range (1e30, 2^40), makes the usage
// Invalid: the gateway bills the attempt as if no usage had come
// (estimated), and an absurd count never reaches the cost arithmetic. A
// count that is absent or null is not reported, not invalid (the
// dialects' SDKs treat it so: Anthropic's message_delta leaves
// input_tokens null, Gemini omits zero counts).
const CountLimit = 100_000_000

// Count reads num, a valid JSON number as the scanners return it, as a
// token count: its value and true when it is an integer in [0, CountLimit)
// (integral floats and exponent forms count: 12.0, 1.2e1, 120e-1; so does
// -0), else 0 and false. It works on the decimal digits, so it is exact
// for any length and exponent, and it does not allocate.
func Count(num []byte) (int, bool) {
	if len(num) == 0 {
		return 0, false
	}
	neg := num[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	n, start := 0, i
	for ; i < len(num) && num[i] >= '0' && num[i] <= '9'; i++ {
		if n < CountLimit { // past it, stop adding: 20000000000000000e-10 is still 2e6
			n = n*10 + int(num[i]-'0')
		}
	}
	intEnd := i
	if i == len(num) { // an integer: the common case
		return integral(n, neg)
	}
	// The mantissa's digits are num[start:intEnd] then num[fracStart:fracEnd];
	// point is how many of them stand before the decimal point once the
	// exponent is applied.
	fracStart, fracEnd := i, i
	if num[i] == '.' {
		fracStart = i + 1
		for fracEnd = fracStart; fracEnd < len(num) && num[fracEnd] >= '0' && num[fracEnd] <= '9'; fracEnd++ {
		}
	}
	exp := 0
	if j := fracEnd; j < len(num) { // 'e' or 'E'
		j++
		eneg := num[j] == '-'
		if num[j] == '+' || num[j] == '-' {
			j++
		}
		for ; j < len(num); j++ {
			// Saturate (int may be 32 bits): beyond 10^8 digits any
			// number shorter than that is out of range or zero either way.
			if exp < 1e8 {
				exp = exp*10 + int(num[j]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	ints := intEnd - start
	total := ints + fracEnd - fracStart
	digit := func(k int) int {
		if k < ints {
			return int(num[start+k] - '0')
		}
		return int(num[fracStart+k-ints] - '0')
	}
	point := ints + exp
	n = 0
	for k := 0; k < point; k++ {
		switch {
		case k < total:
			n = n*10 + digit(k)
		case n == 0:
			k = point // 0e999999999: zeros stay zero, do not loop to the exponent
		default:
			n *= 10
		}
		if n >= CountLimit {
			return 0, false
		}
	}
	for k := max(point, 0); k < total; k++ {
		if digit(k) != 0 {
			return 0, false // a fraction: not a count
		}
	}
	return integral(n, neg)
}

// integral is the count n of a number whose sign was neg: -0 is 0, any
// other negative is not a count.
func integral(n int, neg bool) (int, bool) {
	if n >= CountLimit || neg && n != 0 {
		return 0, false
	}
	return n, true
}

// TokenCount is a token count in an upstream answer decoded with
// encoding/json, read by the rule of Count: N is the count, Invalid is true
// when the value is there but not a valid count (a string, a fraction, a
// negative or out-of-range number, any other kind of value). Null and
// absence leave it zero and valid.
type TokenCount struct {
	N       int
	Invalid bool
}

// UnmarshalJSON implements json.Unmarshaler; it never fails, so one bad
// count does not fail the whole answer.
func (c *TokenCount) UnmarshalJSON(data []byte) error {
	s := scanner{b: data}
	switch p := s.peek(); {
	case p == 'n':
		return nil
	case p == '-' || p >= '0' && p <= '9':
		c.N, c.Invalid = 0, true
		start := s.i
		if s.number() == nil && s.end() == nil {
			n, ok := Count(s.b[start:s.i])
			c.N, c.Invalid = n, !ok
		}
	default:
		c.N, c.Invalid = 0, true
	}
	return nil
}
