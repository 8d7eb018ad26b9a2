package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/provider"
)

// FuzzStream feeds arbitrary upstream bodies to the stream translation. It
// must not panic; every chunk it returns is valid JSON (encoding/json's
// verdict) that api.ScanChunk reads, and the stream's ChunkInfo agrees
// with api.ScanChunk on it (a heartbeat's is zero); it ends, with io.EOF only after
// message_stop and otherwise with an error the gateway classifies, within
// a bounded number of calls; and it returns the same events whether the
// body arrives whole or one byte per read.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"type\":\"message_start\",\"message\":{\"id\":\"a\\u0022b\",\"model\":\"\\ud800\"}}\n\ndata: {\"t\\u0079pe\":\"content_block_start\",\"index\":0e0,\"content_block\":{\"type\":\"tool_use\",\"input\":{\"a\":[1,{\"b\":null}]}}}\n\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\ndata:{\"type\":\"message_stop\"}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		whole := fuzzTranscript(t, body, bytes.NewReader(body))
		bytewise := fuzzTranscript(t, body, iotest.OneByteReader(bytes.NewReader(body)))
		if whole != bytewise {
			t.Errorf("whole input gave\n%s\none byte per read gave\n%s", whole, bytewise)
		}
	})
}

func fuzzTranscript(t *testing.T, body []byte, r io.Reader) string {
	st := openStream(t, r)
	defer st.Close()
	var counted textPieces
	st.(provider.TextCounter).CountText(&counted)
	defer st.(provider.Reporter).Reported()
	var out strings.Builder
	// Each Next result reads an upstream event of at least 3 bytes, but for
	// the 3 after message_stop (finish, usage, io.EOF) and the end.
	limit := len(body)/3 + 4
	stopped := false
	for range limit {
		ev, err := st.Next()
		if err != nil {
			switch {
			case err == io.EOF:
				if !stopped {
					t.Fatalf("io.EOF before the usage chunk of message_stop")
				}
			case errors.Is(err, provider.ErrTruncated), errors.Is(err, provider.ErrMalformed):
			default:
				var perr *provider.Error
				if !errors.As(err, &perr) || perr.Status == 0 {
					t.Fatalf("got %v, want io.EOF, ErrTruncated, ErrMalformed or an error event's *provider.Error", err)
				}
			}
			out.WriteString("end: " + describe(err))
			return out.String()
		}
		checkInfo(t, st, ev.Data)
		if len(ev.Data) > 0 {
			if !json.Valid(ev.Data) {
				t.Fatalf("invalid chunk JSON: %s", ev.Data)
			}
			var found textPieces
			info, err := api.ScanChunkText(ev.Data, &found)
			if err != nil {
				t.Fatalf("api.ScanChunk(%s): %v", ev.Data, err)
			}
			if strings.Join(counted, "\x00") != strings.Join(found, "\x00") || len(counted) != len(found) {
				t.Fatalf("chunk %s: counted %q, api.ScanChunkText finds %q", ev.Data, counted, found)
			}
			if info.HasUsage {
				stopped = true
			}
		}
		counted = counted[:0]
		out.Write(ev.Data)
		out.WriteByte('\n')
	}
	t.Fatalf("no end after %d calls", limit)
	return ""
}

// FuzzParseFast checks that the fast path reads the events it accepts as
// the general path does: whenever scanFastDelta accepts an event, parse
// accepts it too and finds the same kind, index and string.
func FuzzParseFast(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the quick brown fox"}}`,
		`{"type":"content_block_delta","index":12,"delta":{"type":"thinking_delta","thinking":"\u00e9\n\"x\""}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\": 1"}}`,
		`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":1e0,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x","more":1}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}} `,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"},"type":"ping"}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kind, index, lit, ok := scanFastDelta(data)
		if !ok {
			return
		}
		s := &stream{}
		if err := s.parse(data); err != nil {
			t.Fatalf("scanFastDelta accepted %s, parse says %v", data, err)
		}
		want := map[deltaKind][]byte{deltaText: s.f.text, deltaThinking: s.f.thinking, deltaJSON: s.f.partial}[s.f.delta]
		if s.f.kind != evBlockDelta || !s.f.hasIx || s.f.index != index || s.f.delta != kind || !bytes.Equal(lit, want) {
			t.Errorf("for %s scanFastDelta found %v %d %s, parse %+v", data, kind, index, lit, s.f)
		}
	})
}

// FuzzScanner checks the scanner's verdict on any value against
// encoding/json's, nesting beyond maxDepth aside.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]}`, `[`, `{"a":1,}`, `01`, `"\x01"`, `"\ud800"`, `1e`, `-`, `{"a" 1}`, ` [ ] `, `"\/"`, `"\q"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := scanner{b: b}
		err := s.skip()
		if err == nil {
			err = s.end()
		}
		var se *syntaxError
		if err != nil && errors.As(err, &se) && se.msg == "nested too deep" {
			return
		}
		if got, want := err == nil, json.Valid(b); got != want {
			t.Errorf("scanner says valid=%v (%v), encoding/json says %v, for %q", got, err, want, b)
		}
	})
}

// The literals the stream copies decode to what the upstream meant: is()
// and unquote() agree with encoding/json on escaped spellings.
func TestIsEscaped(t *testing.T) {
	tests := []struct {
		lit  string
		want string
		is   bool
	}{
		{`"text_delta"`, "text_delta", true},
		{`"text\u005fdelta"`, "text_delta", true},
		{`"\u0074ext_delta"`, "text_delta", true},
		{`"text_delt"`, "text_delta", false},
		{`"text_deltaa"`, "text_delta", false},
		{`"text\\_delta"`, "text_delta", false},
	}
	for _, tt := range tests {
		if got := is([]byte(tt.lit), tt.want); got != tt.is {
			t.Errorf("is(%s, %q) = %v, want %v", tt.lit, tt.want, got, tt.is)
		}
	}
}
