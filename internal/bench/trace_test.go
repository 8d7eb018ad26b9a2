package bench

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/sim"
)

func loadTestTrace(t *testing.T, name, format string, w TraceWindow) *Trace {
	t.Helper()
	tr, err := LoadTrace("testdata/"+name, format, w)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestReadTraceSamples reads the hand-written sample of each format: the
// offsets from the first row, the lengths, the blocks, the sessions.
func TestReadTraceSamples(t *testing.T) {
	type want struct {
		at           time.Duration
		line, in     int
		out          int
		blocks       int
		prompt, sess string
	}
	for _, c := range []struct {
		file, format string
		want         []want
	}{
		{"trace-mooncake.jsonl", TraceMooncake, []want{
			{0, 1, 2000, 12, 4, "", ""},
			{150 * time.Millisecond, 2, 1900, 7, 4, "", ""},
			{150 * time.Millisecond, 4, 600, 1, 2, "", ""},
			{420 * time.Millisecond, 5, 2600, 20, 6, "", ""},
			{900 * time.Millisecond, 6, 1100, 3, 3, "", ""},
		}},
		{"trace-azure.csv", TraceAzure, []want{
			{0, 2, 374, 44, 0, "", ""},
			{39710 * time.Microsecond, 3, 396, 109, 0, "", ""},
			{39710 * time.Microsecond, 4, 879, 1, 0, "", ""},
			{329411 * time.Microsecond, 5, 1205, 0, 0, "", ""},
			{1569410 * time.Microsecond, 6, 64, 12, 0, "", ""},
		}},
		{"trace.jsonl", TraceJSONL, []want{
			{0, 1, 1500, 8, 0, "", "alice"},
			{40500 * time.Microsecond, 2, 0, 3, 0, "Say hello in French.", ""},
			{300 * time.Millisecond, 3, 2100, 5, 0, "", "alice"},
			{300 * time.Millisecond, 4, 12, 9, 0, "Name three rivers.", "bob"},
		}},
	} {
		for _, format := range []string{c.format, ""} { // given, then detected
			t.Run(c.file+"/"+format, func(t *testing.T) {
				tr := loadTestTrace(t, c.file, format, TraceWindow{})
				if tr.Format != c.format {
					t.Errorf("format: got %q, want %q", tr.Format, c.format)
				}
				if len(tr.Entries) != len(c.want) {
					t.Fatalf("entries: got %d, want %d", len(tr.Entries), len(c.want))
				}
				for i, w := range c.want {
					e := tr.Entries[i]
					// Azure's 7 fractional digits are read through float64 ms: within a µs.
					if d := e.At - w.at; d < -time.Microsecond || d > time.Microsecond {
						t.Errorf("entry %d at: got %v, want %v", i, e.At, w.at)
					}
					if e.Line != w.line || e.InputTokens != w.in || e.OutputTokens != w.out || len(e.Blocks) != w.blocks || e.Prompt != w.prompt || e.Session != w.sess {
						t.Errorf("entry %d: got line %d in %d out %d blocks %d prompt %q session %q, want %+v",
							i, e.Line, e.InputTokens, e.OutputTokens, len(e.Blocks), e.Prompt, e.Session, w)
					}
				}
			})
		}
	}
	tr := loadTestTrace(t, "trace-mooncake.jsonl", "", TraceWindow{})
	if got := tr.Entries[3].Blocks; len(got) != 6 || got[0] != 0 || got[4] != 7 || got[5] != 8 {
		t.Errorf("hash ids of line 5: got %v, want [0 1 2 3 7 8]", got)
	}
}

func TestReadTraceWindow(t *testing.T) {
	for _, c := range []struct {
		window string
		at     []time.Duration // kept entries' offsets, from the window's start
	}{
		{"", []time.Duration{0, 150 * time.Millisecond, 150 * time.Millisecond, 420 * time.Millisecond, 900 * time.Millisecond}},
		{"150ms", []time.Duration{0}},
		{"150ms:500ms", []time.Duration{0, 0, 270 * time.Millisecond}},
		{"150ms-500ms", []time.Duration{0, 0, 270 * time.Millisecond}},
		{"400ms:", []time.Duration{20 * time.Millisecond, 500 * time.Millisecond}},
	} {
		w, err := ParseTraceWindow(c.window)
		if err != nil {
			t.Fatalf("%q: %v", c.window, err)
		}
		tr := loadTestTrace(t, "trace-mooncake.jsonl", TraceMooncake, w)
		var got []time.Duration
		for _, e := range tr.Entries {
			got = append(got, e.At)
		}
		if len(got) != len(c.at) {
			t.Fatalf("window %q: got offsets %v, want %v", c.window, got, c.at)
		}
		for i := range got {
			if got[i] != c.at[i] {
				t.Errorf("window %q: got offsets %v, want %v", c.window, got, c.at)
				break
			}
		}
	}
	w, _ := ParseTraceWindow("10s:20s")
	if _, err := LoadTrace("testdata/trace-mooncake.jsonl", "", w); err == nil || !strings.Contains(err.Error(), "no requests in the window 10s:20s") {
		t.Errorf("empty window: got %v, want an error naming the window", err)
	}
}

func TestParseTraceWindow(t *testing.T) {
	for _, c := range []struct {
		in   string
		want TraceWindow
		ok   bool
	}{
		{"", TraceWindow{}, true},
		{"10m", TraceWindow{0, 10 * time.Minute}, true},
		{"5m:15m", TraceWindow{5 * time.Minute, 15 * time.Minute}, true},
		{"5m-15m", TraceWindow{5 * time.Minute, 15 * time.Minute}, true},
		{"5m:", TraceWindow{5 * time.Minute, 0}, true},
		{":10m", TraceWindow{}, false},
		{"15m:5m", TraceWindow{}, false},
		{"5m:5m", TraceWindow{}, false},
		{"0s", TraceWindow{}, false},
		{"ten", TraceWindow{}, false},
		{"-5m", TraceWindow{}, false},
	} {
		got, err := ParseTraceWindow(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseTraceWindow(%q): got %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestReadTraceErrors checks that bad input is an error naming the file,
// the line and the problem.
func TestReadTraceErrors(t *testing.T) {
	long := `{"timestamp":0,"input_length":1,"output_length":1,"x":"` + strings.Repeat("a", MaxTraceLine) + `"}`
	for _, c := range []struct {
		name, format, in, want string
	}{
		{"not json", TraceMooncake, "{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\nnope\n", "t:2: mooncake: invalid character"},
		{"no timestamp", TraceMooncake, `{"input_length":1,"output_length":1}`, `t:1: mooncake: no "timestamp"`},
		{"no output", TraceMooncake, `{"timestamp":1,"input_length":1}`, `t:1: mooncake: no "output_length"`},
		{"zero input", TraceMooncake, `{"timestamp":1,"input_length":0,"output_length":1}`, "t:1: input_length 0: want an integer in [1, "},
		{"fraction", TraceMooncake, `{"timestamp":1,"input_length":1.5,"output_length":1}`, "t:1: input_length 1.5"},
		{"huge output", TraceMooncake, `{"timestamp":1,"input_length":1,"output_length":2000000}`, "t:1: output_length 2e+06"},
		{"negative hash", TraceMooncake, `{"timestamp":1,"input_length":1,"output_length":1,"hash_ids":[-1]}`, "t:1: mooncake: json: cannot unmarshal number -1"},
		{"negative time", TraceMooncake, `{"timestamp":-1,"input_length":1,"output_length":1}`, "t:1: mooncake: timestamp -1"},
		{"before first", TraceMooncake, "{\"timestamp\":10,\"input_length\":1,\"output_length\":1}\n{\"timestamp\":9,\"input_length\":1,\"output_length\":1}", "t:2: arrival 1.000 ms before the first row's"},
		{"long line", TraceMooncake, "\n\n" + long, "t:3: line longer than"},
		{"empty", TraceMooncake, "\n \n", "t: no requests in the trace"},
		{"azure header", TraceAzure, "time,ctx,gen\n", "t:1: azure: header \"time,ctx,gen\": want the columns"},
		{"azure fields", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\n", "t:2: azure: 2 fields, the header has 3"},
		{"azure time", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n18:15:46,1,1\n", `t:2: azure: TIMESTAMP "18:15:46"`},
		{"azure count", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,x,1\n", `t:2: azure: ContextTokens "x"`},
		{"azure only header", TraceAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n", "t: no requests in the trace"},
		{"jsonl no at", TraceJSONL, `{"prompt":"hi","output_tokens":1}`, `t:1: no "at_ms"`},
		{"jsonl no prompt", TraceJSONL, `{"at_ms":0,"output_tokens":1}`, `t:1: want "prompt" or "input_tokens"`},
		{"jsonl empty prompt", TraceJSONL, `{"at_ms":0,"prompt":"","output_tokens":1}`, `t:1: "prompt" is empty`},
		{"jsonl no output", TraceJSONL, `{"at_ms":0,"prompt":"x"}`, `t:1: no "output_tokens"`},
		{"format", "burstgpt", "x", `trace format "burstgpt": want one of mooncake, azure, jsonl`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(c.in), "t", c.format, TraceWindow{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestDetectTraceFormat(t *testing.T) {
	for _, c := range []struct{ name, head, want string }{
		{"x.csv", "", TraceAzure},
		{"x", "\nTIMESTAMP,ContextTokens,GeneratedTokens\n", TraceAzure},
		{"x.jsonl", `{"timestamp":0,"input_length":5,"output_length":1,"hash_ids":[1]}`, TraceMooncake},
		{"x.jsonl", "\n" + `{"at_ms":0,"prompt":"x","output_tokens":1}` + "\n", TraceJSONL},
		{"x.jsonl", `{"messages":[]}`, ""},
		{"x.txt", "hello", ""},
	} {
		got, err := DetectTraceFormat(c.name, []byte(c.head))
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("DetectTraceFormat(%q, %q): got %q, %v; want %q", c.name, c.head, got, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "--trace-format mooncake|azure|jsonl") {
			t.Errorf("error %q does not say which flag to pass", err)
		}
	}
}

// TestTraceText checks the synthesised prompts: 4 characters a token; the
// same block id, the same text, wherever it stands; other ids, other text;
// a session's prompts beginnings of one text.
func TestTraceText(t *testing.T) {
	text := func(e TraceEntry, i int) string { return string(appendTraceText(nil, &e, i, traceTextTokens(&e))) }
	a := text(TraceEntry{InputTokens: 2000, Blocks: []uint64{0, 1, 2, 3}}, 0)
	b := text(TraceEntry{InputTokens: 1900, Blocks: []uint64{0, 1, 2, 4}}, 1)
	c := text(TraceEntry{InputTokens: 600, Blocks: []uint64{1}}, 2)
	if len(a) != 4*(2000-promptOverhead) || len(b) != 4*(1900-promptOverhead) {
		t.Fatalf("lengths: got %d and %d, want %d and %d", len(a), len(b), 4*(2000-promptOverhead), 4*(1900-promptOverhead))
	}
	if a[:3*blockChars] != b[:3*blockChars] {
		t.Error("entries with the same first three hash ids do not share their first three blocks")
	}
	if a[3*blockChars:3*blockChars+64] == b[3*blockChars:3*blockChars+64] {
		t.Error("different fourth hash ids gave the same text")
	}
	if c[:blockChars] != a[blockChars:2*blockChars] {
		t.Error("hash id 1 gave another text at another position")
	}
	if a != text(TraceEntry{InputTokens: 2000, Blocks: []uint64{0, 1, 2, 3}}, 7) {
		t.Error("the same hash ids gave another text")
	}
	for _, ch := range []byte(a) {
		if ch != ' ' && (ch < 'a' || ch > 'z') {
			t.Fatalf("character %q: want lower-case ASCII words", ch)
		}
	}
	// Without hash ids: an entry's own text, unlike another entry's.
	own1, own2 := text(TraceEntry{InputTokens: 1500}, 1), text(TraceEntry{InputTokens: 1500}, 2)
	if own1[:64] == own2[:64] {
		t.Error("two entries without hash ids begin with the same text")
	}
	// A session: the longer turn extends the shorter.
	s1, s2 := text(TraceEntry{InputTokens: 1500, Session: "alice"}, 0), text(TraceEntry{InputTokens: 2100, Session: "alice"}, 2)
	if !strings.HasPrefix(s2, s1) {
		t.Error("a session's later prompt does not begin with its earlier one")
	}
	if s3 := text(TraceEntry{InputTokens: 1500, Session: "bob"}, 0); s3[:64] == s1[:64] {
		t.Error("two sessions begin with the same text")
	}
	if got := text(TraceEntry{InputTokens: 3}, 0); len(got) != 4 {
		t.Errorf("a prompt shorter than its framing: got %d characters, want 4 (one token)", len(got))
	}
}

// TestTraceReplaySim replays the Mooncake sample against the simulator in
// each client API: every request answers exactly its recorded output
// tokens, its prompt is its recorded length by the sim's count, and (chat)
// the prompts sharing hash ids read the shared prefix from the sim's
// prompt cache.
func TestTraceReplaySim(t *testing.T) {
	p := sim.DefaultProfile()
	p.TTFT, p.TTFTP99, p.ITL, p.ITLJitter, p.PrefillPerToken = time.Millisecond, time.Millisecond, time.Millisecond, 0, 0
	tr := loadTestTrace(t, "trace-mooncake.jsonl", "", TraceWindow{})
	for _, apiName := range APIs {
		t.Run(apiName, func(t *testing.T) {
			srv := httptest.NewServer(sim.New(sim.Options{Profile: p, Profiles: []sim.Profile{}, Seed: 3}))
			defer srv.Close()
			res, err := Run(context.Background(), Config{
				BaseURL: srv.URL + "/v1", API: apiName, Model: "any", Trace: tr, TraceSpeed: 5, KeepRequests: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Runs[0]
			if r.Succeeded != len(tr.Entries) || r.Requests != len(tr.Entries) {
				t.Fatalf("succeeded: got %d of %d, want %d (errors %v)", r.Succeeded, r.Requests, len(tr.Entries), r.Errors)
			}
			st := r.Trace
			if st == nil || r.ScheduleLag == nil || r.CacheReadShare == nil {
				t.Fatalf("trace figures: got trace %v, schedule lag %v, cache share %v; want all", st, r.ScheduleLag, r.CacheReadShare)
			}
			if st.OutputMismatch != 0 || st.InputMismatch != 0 || st.RecordedOutputTokens != 43 || st.AchievedOutputTokens != 43 ||
				st.RecordedInputTokens != 8200 || st.AchievedInputTokens != 8200 {
				t.Errorf("tokens: got %+v, want input 8200/8200 and output 43/43, none differing", *st)
			}
			if st.Entries != 5 || st.PeakRate != 5 || st.Speed != 5 || st.SpanS != 0.18 {
				t.Errorf("schedule: got %+v, want 5 entries, peak 5/s, speed 5, span 0.18 s", *st)
			}
			for i, q := range r.Records {
				e := &tr.Entries[i]
				if q.Entry != e || q.Intended != e.At/5 || q.MaxTokens != max(1, e.OutputTokens) {
					t.Errorf("request %d: got entry line %d, intended %v, max_tokens %d; want line %d, %v, %d",
						i, q.Entry.Line, q.Intended, q.MaxTokens, e.Line, e.At/5, e.OutputTokens)
				}
			}
			if apiName != APIChat {
				return
			}
			// Request 1 shares hash ids 0-2 (1536 tokens) with request 0;
			// request 3 shares 0-3, of which request 0 held 1994 text tokens.
			// OpenAI's automatic cache reads whole steps of 128 from 1024.
			wantRead := []int{0, 1536, 0, 1920, 0}
			for i, q := range r.Records {
				if q.CacheReadTokens != wantRead[i] {
					t.Errorf("request %d: cache read %d tokens, want %d", i, q.CacheReadTokens, wantRead[i])
				}
			}
			if r.CacheReadTok != 1536+1920 {
				t.Errorf("cache reads: got %d, want %d", r.CacheReadTok, 1536+1920)
			}
			var buf bytes.Buffer
			if err := WriteTable(&buf, r); err != nil {
				t.Fatal(err)
			}
			if want := "input 8200/8200 (0 differ), output 43/43 (0 differ); cache reads 42.1% of input"; !strings.Contains(buf.String(), want) {
				t.Errorf("table: got\n%s\nwant a line with %q", buf.String(), want)
			}
		})
	}
}

// BenchmarkTraceRequest is the cost of building one replayed request of a
// Mooncake-sized prompt (about 8k tokens, 16 blocks), which the builder
// goroutine pays ahead of the send time.
func BenchmarkTraceRequest(b *testing.B) {
	r, err := prepare(Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Trace: &Trace{Entries: []TraceEntry{{}}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tmpl, _ := dialectBody(APIChat, "m", Prompt{Messages: []api.Message{api.TextMessage("user", "\x00\x01\x02")}}, nil)
	head, tail, _ := bytes.Cut(tmpl, []byte(`\u0000\u0001\u0002`))
	e := &TraceEntry{InputTokens: 8000, OutputTokens: 200, Blocks: []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}
	b.ReportAllocs()
	for i := range b.N {
		r.traceRequest(e, i, head, tail)
	}
}
