package eventstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// awsEncode encodes a message with the AWS SDK's encoder, the reference.
func awsEncode(t testing.TB, headers aws.Headers, payload []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := aws.NewEncoder().Encode(&b, aws.Message{Headers: headers, Payload: payload}); err != nil {
		t.Fatalf("reference encoder: %v", err)
	}
	return b.Bytes()
}

// oneByte reads one byte per Read call: every byte boundary is a cut.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func decodeAll(t testing.TB, r io.Reader, max int) ([]Message, error) {
	t.Helper()
	d := NewDecoder(r, max)
	var out []Message
	for {
		m, err := d.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		// Copy: the message's slices are reused by the next call.
		out = append(out, Message{Headers: bytes.Clone(m.Headers), Payload: bytes.Clone(m.Payload)})
		if cap(d.buf) > max+4096 && cap(d.buf) > DefaultMaxMessage {
			t.Fatalf("buffer grew to %d, past the limit %d", cap(d.buf), max)
		}
	}
}

// TestBedrockChunk decodes a Bedrock-shaped chunk event encoded by the AWS
// SDK's encoder: its three string headers and its JSON payload.
func TestBedrockChunk(t *testing.T) {
	payload := []byte(`{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0=","p":"abcd"}`)
	var hs aws.Headers
	hs.Set(":event-type", aws.StringValue("chunk"))
	hs.Set(":content-type", aws.StringValue("application/json"))
	hs.Set(":message-type", aws.StringValue("event"))
	raw := awsEncode(t, hs, payload)
	for _, r := range []io.Reader{bytes.NewReader(raw), oneByte{bytes.NewReader(raw)}} {
		msgs, err := decodeAll(t, r, 0)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("got %d messages, %v; want 1", len(msgs), err)
		}
		m := msgs[0]
		if !m.Is(":event-type", "chunk") || !m.Is(":message-type", "event") || m.String(":content-type") != "application/json" {
			t.Errorf("headers: got event-type %q message-type %q", m.String(":event-type"), m.String(":message-type"))
		}
		if m.Is(":event-type", "chunks") {
			t.Errorf("Is matched a different value")
		}
		if _, _, ok := m.Header(":exception-type"); ok {
			t.Errorf("an absent header was found")
		}
		if !bytes.Equal(m.Payload, payload) {
			t.Errorf("payload: got %q, want %q", m.Payload, payload)
		}
	}
}

// TestReferenceVectors decodes the AWS SDK's published event-stream test
// vectors (its module's testdata, read from the module cache): every
// positive vector decodes to its documented payload and headers, every
// negative one is refused.
func TestReferenceVectors(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Skipf("the AWS SDK's event-stream module is not in the module cache (%v): vectors not run", err)
	}
	for _, kind := range []string{"positive", "negative"} {
		files, _ := filepath.Glob(filepath.Join(dir, "testdata", "encoded", kind, "*"))
		if len(files) == 0 {
			t.Fatalf("no %s vectors under %s", kind, dir)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := kind + "/" + filepath.Base(f)
			msgs, err := decodeAll(t, bytes.NewReader(raw), 0)
			if kind == "negative" {
				if err == nil {
					t.Errorf("%s: decoded %d messages, want an error", name, len(msgs))
				}
				continue
			}
			if err != nil || len(msgs) != 1 {
				t.Errorf("%s: got %d messages, %v; want 1", name, len(msgs), err)
				continue
			}
			ref, err := aws.NewDecoder().Decode(bytes.NewReader(raw), nil)
			if err != nil {
				t.Fatalf("%s: reference decoder: %v", name, err)
			}
			checkSame(t, name, msgs[0], ref)
		}
	}
}

// checkSame compares our message with the reference decoder's.
func checkSame(t testing.TB, name string, m Message, ref aws.Message) {
	t.Helper()
	if !bytes.Equal(m.Payload, ref.Payload) {
		t.Errorf("%s: payload %q, reference %q", name, m.Payload, ref.Payload)
	}
	n := 0
	for h := m.Headers; len(h) > 0; n++ {
		k := int(h[0])
		size, _ := valueSize(h[1+k], h[2+k:])
		h = h[2+k+size:]
	}
	if n != len(ref.Headers) {
		t.Errorf("%s: %d headers, reference %d", name, n, len(ref.Headers))
	}
	for _, rh := range ref.Headers {
		v, typ, ok := m.Header(rh.Name)
		if !ok {
			t.Errorf("%s: header %q missing", name, rh.Name)
			continue
		}
		var want []byte
		switch x := rh.Value.(type) {
		case aws.StringValue:
			want = []byte(x)
		case aws.BytesValue:
			want = []byte(x)
		case aws.BoolValue:
			if (typ == TypeTrue) != bool(x) {
				t.Errorf("%s: header %q: type %d, reference %v", name, rh.Name, typ, x)
			}
			continue
		default:
			// Numeric values: compare their big-endian encodings.
			want = numericBytes(x)
		}
		if !bytes.Equal(v, want) {
			t.Errorf("%s: header %q: %x, reference %x", name, rh.Name, v, want)
		}
	}
}

func numericBytes(v aws.Value) []byte {
	switch x := v.(type) {
	case aws.Int8Value:
		return []byte{byte(x)}
	case aws.Int16Value:
		return binary.BigEndian.AppendUint16(nil, uint16(x))
	case aws.Int32Value:
		return binary.BigEndian.AppendUint32(nil, uint32(x))
	case aws.Int64Value:
		return binary.BigEndian.AppendUint64(nil, uint64(x))
	case aws.TimestampValue:
		return binary.BigEndian.AppendUint64(nil, uint64(time.Time(x).UnixMilli()))
	case aws.UUIDValue:
		return x[:]
	}
	return nil
}

// TestRoundTrip encodes random messages with our encoder and the AWS SDK's,
// and decodes a stream of them whole, one byte per read and in random
// pieces: the same messages each time.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var want []aws.Message
	for i := range 50 {
		var hs aws.Headers
		var ours []Header
		for j := range rng.IntN(4) {
			name := strings.Repeat("h", j+1)
			val := strings.Repeat("v", rng.IntN(300))
			hs.Set(name, aws.StringValue(val))
			ours = append(ours, StringHeader(name, val))
		}
		payload := make([]byte, rng.IntN(5000))
		for k := range payload {
			payload[k] = byte(rng.IntN(256))
		}
		if i%2 == 0 {
			stream = append(stream, awsEncode(t, hs, payload)...)
		} else {
			var err error
			stream, err = AppendMessage(stream, ours, payload)
			if err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, aws.Message{Headers: hs, Payload: payload})
	}
	readers := map[string]io.Reader{
		"whole":    bytes.NewReader(stream),
		"one byte": oneByte{bytes.NewReader(stream)},
		"pieces":   &pieces{b: stream, rng: rand.New(rand.NewPCG(3, 4))},
	}
	for name, r := range readers {
		msgs, err := decodeAll(t, r, 0)
		if err != nil || len(msgs) != len(want) {
			t.Fatalf("%s: got %d messages, %v; want %d", name, len(msgs), err, len(want))
		}
		for i := range msgs {
			checkSame(t, name, msgs[i], want[i])
		}
	}
}

type pieces struct {
	b   []byte
	rng *rand.Rand
}

func (p *pieces) Read(dst []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(dst), len(p.b), 1+p.rng.IntN(700))
	copy(dst, p.b[:n])
	p.b = p.b[n:]
	return n, nil
}

// TestHostile: wrong CRCs, lengths past the limit, truncated preludes and
// bodies are refused with the error that names them, without reading or
// allocating what a hostile length claims.
func TestHostile(t *testing.T) {
	good, _ := AppendMessage(nil, []Header{StringHeader(":event-type", "chunk")}, []byte(`{"bytes":"e30="}`))
	huge := func(total uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, total)
		b = binary.BigEndian.AppendUint32(b, 0)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 1; return b }
	tests := []struct {
		name string
		in   []byte
		want string // substring of the error; "truncated" means ErrTruncated
	}{
		{"prelude CRC", flip(9), "prelude CRC"},
		{"message CRC", flip(len(good) - 1), "message CRC"},
		{"payload bit", flip(len(good) - 6), "message CRC"},
		{"4 GiB length", huge(0xffffffff), "message length"},
		{"length past the limit", huge(1 << 20), "message length"},
		{"length under the minimum", huge(15), "message length"},
		{"prelude cut", good[:7], "truncated"},
		{"body cut", good[:len(good)-1], "truncated"},
		{"second message cut", append(bytes.Clone(good), good[:20]...), "truncated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeAll(t, bytes.NewReader(tt.in), 64<<10)
			if err == nil {
				t.Fatalf("got no error, want %q", tt.want)
			}
			if tt.want == "truncated" {
				if !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("got %v, want ErrTruncated", err)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want a FormatError naming %q", err, tt.want)
			}
		})
	}
	// A header that overruns its section, with both CRCs right.
	bad := []byte{3, 'a', 'b', 'c', TypeString, 0, 200, 'x'}
	b := binary.BigEndian.AppendUint32(nil, uint32(minMessage+len(bad)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(bad)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, bad...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	if _, err := decodeAll(t, bytes.NewReader(b), 0); err == nil || !strings.Contains(err.Error(), "overruns") {
		t.Errorf("overrunning header: got %v, want an error naming the overrun", err)
	}
}

// TestNextAllocs: decoding a stream of messages allocates nothing per
// message once the buffer has grown.
func TestNextAllocs(t *testing.T) {
	msg, _ := AppendMessage(nil, []Header{StringHeader(":event-type", "chunk"), StringHeader(":message-type", "event")}, []byte(`{"bytes":"eyJ0eXBlIjoicGluZyJ9"}`))
	stream := bytes.Repeat(msg, 1000)
	r := bytes.NewReader(stream)
	d := NewDecoder(r, 0)
	d.Next() // first call sizes the buffer
	allocs := testing.AllocsPerRun(500, func() {
		m, err := d.Next()
		if err != nil || !m.Is(":event-type", "chunk") {
			t.Fatalf("Next: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("got %.1f allocations per message, want 0", allocs)
	}
}

func BenchmarkDecode(b *testing.B) {
	msg, _ := AppendMessage(nil, []Header{StringHeader(":event-type", "chunk"), StringHeader(":content-type", "application/json"), StringHeader(":message-type", "event")},
		[]byte(`{"bytes":"eyJ0eXBlIjoiY29udGVudF9ibG9ja19kZWx0YSIsImluZGV4IjowLCJkZWx0YSI6eyJ0eXBlIjoidGV4dF9kZWx0YSIsInRleHQiOiIgaGVsbG8ifX0=","p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"}`))
	stream := bytes.Repeat(msg, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	r := bytes.NewReader(stream)
	d := NewDecoder(r, 0)
	for i := 0; i < b.N; i++ {
		if i%1024 == 0 {
			r.Reset(stream)
			d = NewDecoder(r, 0)
		}
		if _, err := d.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecoder: on any input the decoder does not panic, keeps its buffer
// within the limit, gives the same messages whole and one byte per read,
// and whatever it accepts the AWS SDK's decoder accepts too, with the same
// payload and headers.
func FuzzDecoder(f *testing.F) {
	good, _ := AppendMessage(nil, []Header{StringHeader(":event-type", "chunk"), {Name: "n", Type: TypeInt, Value: []byte{0, 0, 0, 7}}, {Name: "t", Type: TypeTrue}}, []byte(`{"bytes":"e30="}`))
	f.Add(good)
	f.Add(append(bytes.Clone(good), good...))
	f.Add(good[:10])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 1 << 16
		whole, errWhole := decodeAll(t, bytes.NewReader(in), limit)
		cut, errCut := decodeAll(t, oneByte{bytes.NewReader(in)}, limit)
		if (errWhole == nil) != (errCut == nil) || len(whole) != len(cut) {
			t.Fatalf("whole: %d messages, %v; one byte per read: %d, %v", len(whole), errWhole, len(cut), errCut)
		}
		r := bytes.NewReader(in)
		for i, m := range whole {
			if !bytes.Equal(m.Payload, cut[i].Payload) || !bytes.Equal(m.Headers, cut[i].Headers) {
				t.Fatalf("message %d differs whole and cut", i)
			}
			ref, err := aws.NewDecoder().Decode(r, nil)
			if err != nil {
				t.Fatalf("message %d: we accepted it, the reference refused: %v", i, err)
			}
			checkSame(t, "fuzz", m, ref)
		}
	})
}
