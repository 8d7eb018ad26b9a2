package bench

import "hash/fnv"

// Synthesised prompts of a trace. A prompt of T tokens is 4·T ASCII
// characters of common words, the simulator's estimate (about 4 ASCII
// characters a token; a real BPE tokenizer counts English words at 4-6
// characters a token, so a real endpoint reports somewhat fewer). It is
// made of blocks of BlockTokens tokens: block k of an entry is the text of
// its k-th hash id when it has one (Mooncake), else of its session's k-th
// block (JSONL "session"), else of a block of its own. The text of a block
// depends on its id only, so entries that share leading hash ids share a
// prefix byte for byte and a prompt cache sees it.

// blockChars is the characters of one block: BlockTokens at 4 a token.
const blockChars = 4 * BlockTokens

// promptOverhead is the prompt tokens of a one-message request around its
// text, as the simulator counts them in every dialect: 3 for the request
// (the reply's priming) and 3 for the message. A prompt of L tokens gets
// L - promptOverhead tokens of text.
const promptOverhead = 6

// Namespaces of block ids, so a Mooncake id, a session's block and an
// entry's own block never give the same text.
const (
	blockHashID  = 0x68617368 // "hash"
	blockSession = 0x73657373 // "sess"
	blockOwn     = 0x6f776e   // "own"
)

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// blockKey is the seed of block k of entry e (index i in the trace).
func blockKey(e *TraceEntry, i, k int, session uint64) uint64 {
	switch {
	case k < len(e.Blocks):
		return splitmix64(e.Blocks[k] ^ splitmix64(blockHashID))
	case e.Session != "":
		return splitmix64(uint64(k) ^ splitmix64(session^blockSession))
	}
	return splitmix64(uint64(k) ^ splitmix64(uint64(i)<<20^blockOwn))
}

// appendBlock appends the first n (at most blockChars) characters of the
// block of seed key: words of synthWords separated by spaces.
func appendBlock(dst []byte, key uint64, n int) []byte {
	end := len(dst) + n
	x := key
	for len(dst) < end {
		if len(dst) > end-n { // not the block's first word
			dst = append(dst, ' ')
		}
		x = splitmix64(x)
		dst = append(dst, synthWords[x%uint64(len(synthWords))]...)
	}
	return dst[:end]
}

// appendTraceText appends the synthesised text of entry e (index i) with
// tokens text tokens (4·tokens characters).
func appendTraceText(dst []byte, e *TraceEntry, i, tokens int) []byte {
	var session uint64
	if e.Session != "" {
		h := fnv.New64a()
		h.Write([]byte(e.Session))
		session = h.Sum64()
	}
	chars := 4 * tokens
	for k := 0; chars > 0; k++ {
		n := min(chars, blockChars)
		dst = appendBlock(dst, blockKey(e, i, k, session), n)
		chars -= n
	}
	return dst
}

// traceTextTokens is the text tokens of a synthesised prompt of entry e:
// its recorded prompt length less the request's framing, at least 1.
func traceTextTokens(e *TraceEntry) int {
	return max(1, e.InputTokens-promptOverhead)
}
