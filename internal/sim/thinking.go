package sim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"
)

// Thinking signatures. Anthropic signs each thinking block it sends and
// refuses one passed back whose signature does not match its text; a
// redacted_thinking block's data is opaque and must come back as it was.
// The sim signs with an HMAC-SHA256 under Options.ThinkingKey, so it can
// verify what it issued without keeping state, and a gateway that changes
// a thinking block's text, drops its signature or makes one up is refused
// as Anthropic would refuse it.

// defaultThinkingKey signs when Options.ThinkingKey is empty: every sim
// then accepts the signatures of every other, as one provider does.
var defaultThinkingKey = []byte("streamgate-sim thinking signatures")

// Signature and redacted data versions, the first byte of the decoded value.
const (
	sigVersion      = 0x53 // 'S'
	redactedVersion = 0x52 // 'R'
	redactedNonce   = 16
)

type signer struct{ key []byte }

func newSigner(key []byte) signer {
	if len(key) == 0 {
		key = defaultThinkingKey
	}
	return signer{key: key}
}

func (s signer) mac(kind string, data []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write(data)
	return m.Sum(nil)
}

// sign returns the signature of a thinking block's text: base64 of a
// version byte and the HMAC of the text.
func (s signer) sign(text string) string {
	b := append([]byte{sigVersion}, s.mac("thinking", []byte(text))...)
	return base64.StdEncoding.EncodeToString(b)
}

// verify reports whether sig is the signature of text.
func (s signer) verify(text, sig string) bool {
	b, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(b) != 1+sha256.Size || b[0] != sigVersion {
		return false
	}
	return hmac.Equal(b[1:], s.mac("thinking", []byte(text)))
}

// redacted returns the data of a redacted_thinking block: base64 of a
// version byte, a nonce drawn from seed and the nonce's HMAC.
func (s signer) redacted(seed uint64) string {
	nonce := make([]byte, redactedNonce)
	binary.LittleEndian.PutUint64(nonce, splitmix64(seed))
	binary.LittleEndian.PutUint64(nonce[8:], splitmix64(seed^0x7265646163746564))
	b := append([]byte{redactedVersion}, nonce...)
	return base64.StdEncoding.EncodeToString(append(b, s.mac("redacted", nonce)...))
}

// verifyRedacted reports whether data is the data of a redacted_thinking
// block this signer issued.
func (s signer) verifyRedacted(data string) bool {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) != 1+redactedNonce+sha256.Size || b[0] != redactedVersion {
		return false
	}
	return hmac.Equal(b[1+redactedNonce:], s.mac("redacted", b[1:1+redactedNonce]))
}

// thinkingAsk is what a request asks of thinking, whatever its dialect.
type thinkingAsk struct {
	// mode: thinkUnset follows the profile's Reasoning; thinkOff and
	// thinkOn are the request's own choice.
	mode uint8
	// budget caps the thinking tokens (Anthropic budget_tokens, Gemini
	// thinkingBudget); 0 = no cap.
	budget int
	// quarters scales Profile.ThinkingTokens in quarters (OpenAI
	// reasoning_effort: minimal 1, low 2, medium 4, high 8); 0 means 4.
	quarters int
	// visible: the thinking text is sent (Anthropic thinking blocks,
	// Gemini includeThoughts); otherwise only its tokens are counted.
	visible bool
	// omitted: Anthropic display "omitted", a thinking block with an empty
	// text and a signature.
	omitted bool
}

// cacheKey is what of the thinking settings a prompt cache keys cached
// messages by: on or off, and the budget.
func (a thinkingAsk) cacheKey() string {
	if a.mode != thinkOn {
		return "off"
	}
	return "on " + strconv.Itoa(a.budget)
}

const (
	thinkUnset uint8 = iota
	thinkOff
	thinkOn
)
