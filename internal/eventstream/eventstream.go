// Package eventstream reads and writes AWS's binary event-stream framing
// (application/vnd.amazon.eventstream), the framing Bedrock's
// InvokeModelWithResponseStream and ConverseStream answer in. A message is a
// 12-byte prelude (total length, headers length, CRC32 of those 8 bytes),
// typed headers, a payload and a CRC32 of everything before it. The Decoder
// checks both CRCs and every length against its limits before it trusts
// them, and reuses one buffer, so a stream costs no allocation per message;
// the gateway's Bedrock adapter unwraps each frame here and hands its
// payload to the dialect parser it already has.
package eventstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	preludeLen = 12 // total length, headers length, prelude CRC
	trailerLen = 4  // message CRC
	minMessage = preludeLen + trailerLen

	// DefaultMaxMessage is the largest message a Decoder accepts when no
	// limit is given: AWS caps a payload at 16 MiB and headers at 128 KiB.
	DefaultMaxMessage = 16<<20 + 128<<10 + minMessage
	// MaxHeaders is the largest headers section AWS allows (128 KiB).
	MaxHeaders = 128 << 10
)

// Header value types, as the framing numbers them.
const (
	TypeTrue      = 0
	TypeFalse     = 1
	TypeByte      = 2
	TypeShort     = 3
	TypeInt       = 4
	TypeLong      = 5
	TypeBytes     = 6
	TypeString    = 7
	TypeTimestamp = 8
	TypeUUID      = 9
)

// ErrTruncated reports input that ended inside a message: the upstream cut
// the connection mid-frame. It wraps io.ErrUnexpectedEOF.
var ErrTruncated = fmt.Errorf("eventstream: input ended inside a message: %w", io.ErrUnexpectedEOF)

// A FormatError reports bytes that are not a well-formed message: a CRC
// that does not match, a length out of bounds, a header that overruns its
// section. The stream cannot be resynchronised after one.
type FormatError struct{ Reason string }

func (e *FormatError) Error() string { return "eventstream: " + e.Reason }

func formatErr(format string, a ...any) error {
	return &FormatError{Reason: fmt.Sprintf(format, a...)}
}

// Message is one decoded message. Its slices point into the Decoder's
// buffer and stay valid only until the next call to Next.
type Message struct {
	// Headers is the raw headers section; Header looks a name up in it.
	Headers []byte
	Payload []byte
}

// Header returns the value of the header called name, its type, and
// whether it is present. For string and bytes headers the value is the
// bytes; for the numeric types, their big-endian bytes; for booleans, nil.
// The headers were validated by the Decoder, so the walk cannot overrun.
func (m *Message) Header(name string) (value []byte, typ byte, ok bool) {
	h := m.Headers
	for len(h) > 0 {
		n := int(h[0])
		key := h[1 : 1+n]
		typ = h[1+n]
		h = h[2+n:]
		size, hdr := valueSize(typ, h)
		value = h[hdr:size]
		h = h[size:]
		if string(key) == name {
			return value, typ, true
		}
	}
	return nil, 0, false
}

// String returns the value of the string (or bytes) header called name,
// or "" when it is absent or of another type. It allocates the string.
func (m *Message) String(name string) string {
	v, typ, ok := m.Header(name)
	if !ok || (typ != TypeString && typ != TypeBytes) {
		return ""
	}
	return string(v)
}

// Is reports whether the string header called name has the value want,
// without allocating.
func (m *Message) Is(name, want string) bool {
	v, typ, ok := m.Header(name)
	return ok && typ == TypeString && string(v) == want
}

// valueSize returns the size of a header value of type typ at the start of
// h, including its length prefix, and the size of that prefix; -1 for an
// unknown type or a value that overruns h.
func valueSize(typ byte, h []byte) (size, prefix int) {
	switch typ {
	case TypeTrue, TypeFalse:
		return 0, 0
	case TypeByte:
		size = 1
	case TypeShort:
		size = 2
	case TypeInt:
		size = 4
	case TypeLong, TypeTimestamp:
		size = 8
	case TypeUUID:
		size = 16
	case TypeBytes, TypeString:
		if len(h) < 2 {
			return -1, 0
		}
		size, prefix = 2+int(binary.BigEndian.Uint16(h)), 2
	default:
		return -1, 0
	}
	if size > len(h) {
		return -1, 0
	}
	return size, prefix
}

// checkHeaders validates a headers section: every name non-empty, every
// type known, nothing overrunning the section.
func checkHeaders(h []byte) error {
	for len(h) > 0 {
		n := int(h[0])
		if n == 0 {
			return formatErr("header with an empty name")
		}
		if len(h) < 2+n {
			return formatErr("header name overruns the headers section")
		}
		typ := h[1+n]
		size, _ := valueSize(typ, h[2+n:])
		if size < 0 {
			return formatErr("header %q: type %d unknown or its value overruns the headers section", h[1:1+n], typ)
		}
		h = h[2+n+size:]
	}
	return nil
}

// Decoder reads messages from a stream.
type Decoder struct {
	r   io.Reader
	max int
	buf []byte // buf[off:end] holds unread bytes
	off int
	end int
	err error
}

// NewDecoder returns a Decoder reading from r that refuses messages longer
// than max bytes (0 means DefaultMaxMessage).
func NewDecoder(r io.Reader, max int) *Decoder {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	if max < minMessage {
		max = minMessage
	}
	return &Decoder{r: r, max: max}
}

// Reset makes d read a new stream from r, keeping its buffer (bounded by
// the limit it was made with), so a pooled Decoder costs no allocation.
func (d *Decoder) Reset(r io.Reader) {
	d.r, d.off, d.end, d.err = r, 0, 0, nil
}

// Size is the capacity of d's buffer.
func (d *Decoder) Size() int { return cap(d.buf) }

// Buffered reports whether a whole message is already in the buffer, so
// that Next will return without reading from the source. A relay uses it to
// write the messages of one read with one flush.
func (d *Decoder) Buffered() bool {
	n := d.end - d.off
	if n < preludeLen {
		return false
	}
	total := int(binary.BigEndian.Uint32(d.buf[d.off:]))
	return total >= minMessage && total <= n
}

// Next returns the next message. At a clean end of input (between
// messages) it returns io.EOF; input that ends inside a message gives
// ErrTruncated; bytes that are not a message give a *FormatError. Once it
// has returned an error it returns the same error again.
func (d *Decoder) Next() (Message, error) {
	if d.err != nil {
		return Message{}, d.err
	}
	m, err := d.next()
	if err != nil {
		d.err = err
	}
	return m, err
}

func (d *Decoder) next() (Message, error) {
	if err := d.fill(preludeLen); err != nil {
		if err == io.EOF && d.end == d.off {
			return Message{}, io.EOF
		}
		return Message{}, truncated(err)
	}
	p := d.buf[d.off : d.off+preludeLen]
	total := int(binary.BigEndian.Uint32(p[0:4]))
	hlen := int(binary.BigEndian.Uint32(p[4:8]))
	if got, want := crc32.ChecksumIEEE(p[:8]), binary.BigEndian.Uint32(p[8:12]); got != want {
		return Message{}, formatErr("prelude CRC %08x does not match its bytes' %08x", want, got)
	}
	// Lengths are checked as uint32 values before any int arithmetic, so
	// a hostile length cannot overflow or make us allocate it.
	if uint32(total) < minMessage || total > d.max {
		return Message{}, formatErr("message length %d outside %d..%d", uint32(total), minMessage, d.max)
	}
	if hlen > MaxHeaders || hlen > total-minMessage {
		return Message{}, formatErr("headers length %d does not fit a %d-byte message", uint32(hlen), total)
	}
	if err := d.fill(total); err != nil {
		return Message{}, truncated(err)
	}
	msg := d.buf[d.off : d.off+total]
	body := msg[:total-trailerLen]
	if got, want := crc32.ChecksumIEEE(body), binary.BigEndian.Uint32(msg[total-trailerLen:]); got != want {
		return Message{}, formatErr("message CRC %08x does not match its bytes' %08x", want, got)
	}
	headers := body[preludeLen : preludeLen+hlen]
	if err := checkHeaders(headers); err != nil {
		return Message{}, err
	}
	d.off += total
	return Message{Headers: headers, Payload: body[preludeLen+hlen:]}, nil
}

func truncated(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return ErrTruncated
	}
	return err
}

// fill makes at least n unread bytes available in buf[off:end], reading
// from the source as needed. n is at most d.max, so the buffer never grows
// past the limit.
func (d *Decoder) fill(n int) error {
	for d.end-d.off < n {
		if d.off > 0 && d.off == d.end {
			d.off, d.end = 0, 0
		}
		if len(d.buf)-d.off < n {
			// Compact, then grow to fit n (doubling, bounded by max).
			unread := d.end - d.off
			if cap(d.buf) >= n {
				copy(d.buf[:cap(d.buf)], d.buf[d.off:d.end])
				d.buf = d.buf[:cap(d.buf)]
			} else {
				size := max(2*cap(d.buf), 4096, n)
				size = min(size, max(d.max, n))
				nb := make([]byte, size)
				copy(nb, d.buf[d.off:d.end])
				d.buf = nb
			}
			d.off, d.end = 0, unread
		}
		k, err := d.r.Read(d.buf[d.end:])
		d.end += k
		if err != nil {
			if d.end-d.off >= n {
				return nil
			}
			return err
		}
	}
	return nil
}

// Header is one header to encode.
type Header struct {
	Name  string
	Type  byte   // TypeString, TypeBytes, … (booleans carry no Value)
	Value []byte // for numeric types, their big-endian bytes
}

// StringHeader returns a header of type string.
func StringHeader(name, value string) Header {
	return Header{Name: name, Type: TypeString, Value: []byte(value)}
}

// ErrTooLarge reports a message that AppendMessage will not encode: a
// header name over 255 bytes, a value over 65,535, or headers over
// MaxHeaders.
var ErrTooLarge = errors.New("eventstream: header or message too large to encode")

// AppendMessage appends the encoding of one message to dst.
func AppendMessage(dst []byte, headers []Header, payload []byte) ([]byte, error) {
	var h bytes.Buffer
	for _, x := range headers {
		if len(x.Name) == 0 || len(x.Name) > 255 || len(x.Value) > 65535 {
			return dst, ErrTooLarge
		}
		h.WriteByte(byte(len(x.Name)))
		h.WriteString(x.Name)
		h.WriteByte(x.Type)
		if x.Type == TypeString || x.Type == TypeBytes {
			h.Write(binary.BigEndian.AppendUint16(nil, uint16(len(x.Value))))
		}
		if x.Type != TypeTrue && x.Type != TypeFalse {
			h.Write(x.Value)
		}
	}
	if h.Len() > MaxHeaders {
		return dst, ErrTooLarge
	}
	total := minMessage + h.Len() + len(payload)
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.Len()))
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
	dst = append(dst, h.Bytes()...)
	dst = append(dst, payload...)
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
	return dst, nil
}
