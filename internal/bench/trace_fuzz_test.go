package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// fuzzTrace checks ReadTrace on any input in format: no panic; the same
// verdict and entries whether the input comes whole or a byte at a time;
// an error names the file; accepted entries are within the bounds, in
// time order; and (JSON formats) a line accepted is one encoding/json
// calls valid.
func fuzzTrace(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := ReadTrace(bytes.NewReader(in), "f", format, TraceWindow{})
		tr2, err2 := ReadTrace(iotest.OneByteReader(bytes.NewReader(in)), "f", format, TraceWindow{})
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("whole: %v; byte by byte: %v", err, err2)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if !reflect.DeepEqual(tr, tr2) {
			t.Fatal("whole and byte-by-byte reads differ")
		}
		if len(tr.Entries) == 0 || len(tr.Entries) > MaxTraceEntries {
			t.Fatalf("%d entries", len(tr.Entries))
		}
		for i, e := range tr.Entries {
			if e.At < 0 || (i > 0 && e.At < tr.Entries[i-1].At) {
				t.Fatalf("entry %d at %v: out of order or negative", i, e.At)
			}
			if e.Line < 1 || e.OutputTokens < 0 || e.OutputTokens > MaxTraceOutput || e.InputTokens < 0 || e.InputTokens > MaxTraceInput ||
				len(e.Blocks) > MaxTraceBlocks || (e.InputTokens == 0 && e.Prompt == "") {
				t.Fatalf("entry %d out of bounds: %+v", i, e)
			}
		}
		if format != TraceAzure {
			for _, line := range bytes.Split(in, []byte("\n")) {
				if line = bytes.TrimSpace(line); len(line) > 0 && !json.Valid(line) {
					t.Fatalf("line %q accepted, but encoding/json calls it invalid", line)
				}
			}
		}
	})
}

func sample(f *testing.F, name string) string {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		f.Fatal(err)
	}
	return string(b)
}

func FuzzReadTraceMooncake(f *testing.F) {
	fuzzTrace(f, TraceMooncake, sample(f, "trace-mooncake.jsonl"),
		`{"timestamp": 1e3, "input_length": 5, "output_length": 0, "hash_ids": []}`,
		`{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [18446744073709551615]}`)
}

func FuzzReadTraceAzure(f *testing.F) {
	fuzzTrace(f, TraceAzure, sample(f, "trace-azure.csv"),
		"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2024-05-10 00:00:00.009930+00:00,10,1\r\n",
		"GeneratedTokens,x,TIMESTAMP,ContextTokens\n1,,2023-11-16T18:15:46Z,\"3\"\n")
}

func FuzzReadTraceJSONL(f *testing.F) {
	fuzzTrace(f, TraceJSONL, sample(f, "trace.jsonl"),
		`{"at_ms": 0, "prompt": "\u00e9\ud800", "output_tokens": 1}`)
}
