// Package affinity keeps one conversation on one (route, provider key)
// target so the provider's prompt cache, which is per API key and per
// machine, stays warm (issue 26). It owns two pure steps of placement: the
// session identity of a request (Identify, and the prefix fingerprints of
// each dialect), and the order of a model's targets for that identity
// (Set.Order: weighted rendezvous hashing with bounded loads). It starts no
// goroutine and knows nothing of health: the caller says which targets may
// take an attempt.
package affinity

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Mode is a model's affinity setting.
type Mode uint8

const (
	// Off places every request by the model's strategy alone.
	Off Mode = iota
	// Session keys on the identity the client gives (prompt_cache_key,
	// X-Session-Id, metadata.user_id, user), else on the prompt's prefix.
	Session
	// Prefix keys on the prompt's prefix only, whatever the client sends:
	// for clients whose ids are per user rather than per conversation.
	Prefix
)

// ParseMode reads the config value: "session", "prefix", "off" or "" (off).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off", "":
		return Off, nil
	case "session":
		return Session, nil
	case "prefix":
		return Prefix, nil
	}
	return Off, fmt.Errorf("unknown affinity %q (want session, prefix or off)", s)
}

func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Session:
		return "session"
	case Prefix:
		return "prefix"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Source says where an identity came from (for logs and metrics labels).
type Source uint8

const (
	None           Source = iota // no identity: place by the strategy
	PromptCacheKey               // OpenAI prompt_cache_key
	SessionHeader                // the X-Session-Id header
	MetadataUser                 // Anthropic metadata.user_id
	User                         // OpenAI user
	PrefixHash                   // fingerprint of the prompt's stable prefix
)

func (s Source) String() string {
	switch s {
	case None:
		return "none"
	case PromptCacheKey:
		return "prompt_cache_key"
	case SessionHeader:
		return "header"
	case MetadataUser:
		return "metadata_user_id"
	case User:
		return "user"
	case PrefixHash:
		return "prefix"
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// SessionHeaderName is the header a client may name its conversation with.
const SessionHeaderName = "X-Session-Id"

// Fields are what a request says about its conversation, as the gateway's
// decoders already hold them: strings of the typed decode (unescaped), the
// header's value, and the prefix fingerprint of the dialect (ChatPrefix,
// MessagesPrefix, ResponsesPrefix). Empty strings and a zero Prefix mean
// absent.
type Fields struct {
	PromptCacheKey string // chat and responses "prompt_cache_key"
	SessionID      string // header X-Session-Id
	MetadataUserID string // messages "metadata.user_id"
	User           string // chat and responses "user"
	Prefix         uint64 // fingerprint of the stable prefix; 0: none
}

// Identity is a request's session identity: Key is what rendezvous hashing
// places. Equal conversations give equal keys on every replica (the hash is
// unseeded), so replicas place a session alike.
type Identity struct {
	Key    uint64
	Source Source
}

// Identify returns the identity of f under mode; Source None (and Key 0)
// when mode is Off or f names nothing. Under Session the first present of
// prompt_cache_key, X-Session-Id, metadata.user_id, user, prefix wins: the
// explicit cache key first, user last of the explicit ones because one user
// may hold many conversations (their shared system prompt still caches, and
// bounded loads spread a heavy user). Under Prefix only the prefix counts.
// Each source hashes into its own space (a user "a" and a cache key "a" are
// different sessions). It does not allocate.
func Identify(mode Mode, f Fields) Identity {
	switch mode {
	case Session:
		switch {
		case f.PromptCacheKey != "":
			return Identity{keyOf(PromptCacheKey, f.PromptCacheKey), PromptCacheKey}
		case f.SessionID != "":
			return Identity{keyOf(SessionHeader, f.SessionID), SessionHeader}
		case f.MetadataUserID != "":
			return Identity{keyOf(MetadataUser, f.MetadataUserID), MetadataUser}
		case f.User != "":
			return Identity{keyOf(User, f.User), User}
		}
		fallthrough
	case Prefix:
		if f.Prefix != 0 {
			return Identity{mix(f.Prefix ^ uint64(PrefixHash)), PrefixHash}
		}
	}
	return Identity{}
}

// keyOf hashes s into the space of src.
func keyOf(src Source, s string) uint64 {
	return mix(xxhash.Sum64String(s) ^ uint64(src)<<56)
}

// mix is the murmur3 64-bit finalizer: a bijection that spreads every input
// bit over the output.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
