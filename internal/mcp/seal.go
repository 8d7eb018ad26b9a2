package mcp

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// Errors of Sealer.Open: the handler answers both with 404, as the MCP
// transport asks for a session the server does not know.
var (
	// ErrSessionInvalid: not an id this gateway sealed, or sealed for
	// another key or route (tampered, forged, replayed elsewhere).
	ErrSessionInvalid = errors.New("mcp session id is not valid for this key and route")
	// ErrSessionExpired: sealed here for this key and route, past its expiry.
	ErrSessionExpired = errors.New("mcp session has expired")
)

// Sealer seals session state into the ids the gateway hands out and opens
// them on any replica that holds the same secret: AES-256-GCM, its key
// derived once (HKDF-SHA256) from the secret. What an id is bound to — the
// gateway key's hash, the route, the kind of id — is the AEAD's additional
// data, not part of the id: opened under another key or route, or as
// another kind, it fails authentication like a tampered id. Safe for
// concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// idEncoding decodes ids strictly: an id has one spelling (the bits
// after its last byte are zero), so no other string opens as it.
var idEncoding = base64.RawURLEncoding.Strict()

// formatV1 leads every sealed id: the format, so that a later one can be told apart.
const formatV1 = 1

// Kinds of sealed ids (the first byte of their additional data).
const (
	kindSession   = 's'
	kindReference = 'r'
)

// NewSealer derives the sealing key from secret, which must not be empty.
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) == 0 {
		return nil, errors.New("mcp: empty session secret")
	}
	key, err := hkdf.Key(sha256.New, secret, []byte("streamgate mcp session ids"), "aes-256-gcm v1", 32)
	if err != nil {
		return nil, fmt.Errorf("mcp: derive session key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("mcp: session cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("mcp: session cipher: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// RandomSecret is a fresh 32-byte secret: ids sealed with it open on this
// process only.
func RandomSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// KeyHash names a gateway key in what ids are bound to: a hash of the
// key's name (never its secret).
type KeyHash [16]byte

// HashKey returns the KeyHash of the key named name.
func HashKey(name string) KeyHash {
	h := sha256.Sum256([]byte("streamgate mcp key\x00" + name))
	return KeyHash(h[:16])
}

// Binding is what a sealed id is bound to.
type Binding struct {
	Key   KeyHash
	Route string // "" for /mcp, the server's name for /mcp/{server}
}

// Session is the state a 2025-11-25 session carries in its id.
type Session struct {
	// Version is the protocol version negotiated at initialize, an index
	// into legacyVersions.
	Version uint8
	// Caps are the client's capabilities (Caps bits).
	Caps Caps
	// Expires is when the id stops opening, to the second.
	Expires time.Time
	// ID is the session's unique id (the nonce it was sealed with): what
	// per-replica state (cancellation, ended sessions) is keyed by.
	ID [12]byte
}

// Caps are the client capabilities a session remembers.
type Caps uint16

// Caps bits.
const (
	CapRoots Caps = 1 << iota
	CapRootsListChanged
	CapSampling
	CapElicitationForm
	CapElicitationURL
	CapSamplingTools
)

// Has reports whether every bit of o is set in c.
func (c Caps) Has(o Caps) bool { return c&o == o }

const (
	sessionPayload = 8                                  // version, flags, caps, expiry
	sessionSealed  = 1 + 12 + sessionPayload + 16       // format, nonce, payload, tag
	sessionIDLen   = (sessionSealed*8 + 5) / 6          // base64url without padding
	maxAAD         = 1 + len(KeyHash{}) + maxRouteInAAD // kind, key, route
	maxRouteInAAD  = 64
)

// aad writes the additional data of kind under b into buf.
func aad(buf *[maxAAD]byte, kind byte, b *Binding) []byte {
	buf[0] = kind
	copy(buf[1:], b.Key[:])
	n := 1 + len(b.Key)
	if len(b.Route) <= maxRouteInAAD {
		n += copy(buf[n:], b.Route)
	} else { // longer than any server name the config allows: hashed
		h := sha256.Sum256([]byte(b.Route))
		n += copy(buf[n:], h[:])
	}
	return buf[:n]
}

// scratch is the buffers of one Seal or Open: the AEAD is an interface, so
// whatever is passed to it escapes; pooled, they cost no allocation.
type scratch struct {
	raw [sessionSealed]byte
	p   [sessionPayload]byte
	ad  [maxAAD]byte
	out [sessionIDLen]byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Seal returns the id of s bound to b and sets s.ID. It allocates the id only.
func (sl *Sealer) Seal(s *Session, b *Binding) string {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	raw := &sc.raw
	raw[0] = formatV1
	nonce := raw[1:13]
	rand.Read(nonce)
	p := &sc.p
	p[0], p[1] = s.Version, 0
	binary.BigEndian.PutUint16(p[2:4], uint16(s.Caps))
	binary.BigEndian.PutUint32(p[4:8], uint32(s.Expires.Unix()))
	sl.aead.Seal(raw[:13], nonce, p[:], aad(&sc.ad, kindSession, b))
	base64.RawURLEncoding.Encode(sc.out[:], raw[:])
	copy(s.ID[:], nonce)
	return string(sc.out[:])
}

// Open returns the session sealed in id for b, ErrSessionInvalid when id is
// not one sealed here for b, ErrSessionExpired past its expiry at now. It
// does not allocate.
func (sl *Sealer) Open(id string, b *Binding, now time.Time) (Session, error) {
	if len(id) != sessionIDLen {
		return Session{}, ErrSessionInvalid
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	raw := &sc.raw
	// The id is only read: decoded from the string's own bytes.
	n, err := idEncoding.Decode(raw[:], unsafe.Slice(unsafe.StringData(id), len(id)))
	if err != nil || n != sessionSealed || raw[0] != formatV1 {
		return Session{}, ErrSessionInvalid
	}
	p := &sc.p
	if _, err := sl.aead.Open(p[:0], raw[1:13], raw[13:], aad(&sc.ad, kindSession, b)); err != nil {
		return Session{}, ErrSessionInvalid
	}
	s := Session{Version: p[0], Caps: Caps(binary.BigEndian.Uint16(p[2:4])),
		Expires: time.Unix(int64(binary.BigEndian.Uint32(p[4:8])), 0)}
	copy(s.ID[:], raw[1:13])
	if !now.Before(s.Expires) {
		return Session{}, ErrSessionExpired
	}
	return s, nil
}

// Reference is what the id of a server→client request sent to a client
// carries: the server that asked and the server client's opaque handle of
// the request (upstream's Event.ReplyTo), so that the client's answer can
// land on any replica.
type Reference struct {
	Server  string
	ReplyTo string
	Expires time.Time
}

// maxReference bounds a reference's payload (its server name and handle).
const maxReference = 4096

// SealReference returns the id of r bound to b.
func (sl *Sealer) SealReference(r *Reference, b *Binding) (string, error) {
	if len(r.Server) > 255 || len(r.Server)+len(r.ReplyTo) > maxReference {
		return "", fmt.Errorf("mcp: reference to server %q too long to seal", r.Server)
	}
	p := make([]byte, 0, 5+len(r.Server)+len(r.ReplyTo))
	p = binary.BigEndian.AppendUint32(p, uint32(r.Expires.Unix()))
	p = append(p, byte(len(r.Server)))
	p = append(p, r.Server...)
	p = append(p, r.ReplyTo...)
	raw := make([]byte, 13, 13+len(p)+sl.aead.Overhead())
	raw[0] = formatV1
	rand.Read(raw[1:13])
	var ad [maxAAD]byte
	raw = sl.aead.Seal(raw, raw[1:13], p, aad(&ad, kindReference, b))
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// OpenReference returns the reference sealed in id for b (errors as Open's).
func (sl *Sealer) OpenReference(id string, b *Binding, now time.Time) (Reference, error) {
	if len(id) > base64.RawURLEncoding.EncodedLen(13+5+maxReference+16) {
		return Reference{}, ErrSessionInvalid
	}
	raw, err := idEncoding.DecodeString(id)
	if err != nil || len(raw) < 13+5+sl.aead.Overhead() || raw[0] != formatV1 {
		return Reference{}, ErrSessionInvalid
	}
	var ad [maxAAD]byte
	p, err := sl.aead.Open(raw[13:13], raw[1:13], raw[13:], aad(&ad, kindReference, b))
	if err != nil || len(p) < 5 || len(p) < 5+int(p[4]) {
		return Reference{}, ErrSessionInvalid
	}
	r := Reference{Expires: time.Unix(int64(binary.BigEndian.Uint32(p[:4])), 0),
		Server: string(p[5 : 5+int(p[4])]), ReplyTo: string(p[5+int(p[4]):])}
	if !now.Before(r.Expires) {
		return Reference{}, ErrSessionExpired
	}
	return r, nil
}
