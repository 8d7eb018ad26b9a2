package gateway

import "testing"

// The prompt estimate errs high: a token per 4 ASCII bytes (rounded up),
// one per other character, whatever the text's type.
func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abcd", 1},
		{"abcde", 2},
		{"안녕하세요", 5},             // 5 characters of 3 bytes
		{"hi 世界", 3},             // 3 ASCII bytes, 2 characters
		{"\U0001F600 ok", 1 + 1}, // one 4-byte character, 3 ASCII bytes
	}
	for _, tt := range tests {
		if got := estimateTokens(tt.in); got != tt.want {
			t.Errorf("estimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
		}
		if got := estimateTokens([]byte(tt.in)); got != tt.want {
			t.Errorf("estimateTokens([]byte(%q)) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
