package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trace formats (--trace-format).
const (
	// TraceMooncake is Mooncake's JSON lines: {"timestamp": ms,
	// "input_length": N, "output_length": N, "hash_ids": [id, ...]}, each
	// hash id naming one 512-token block of the prompt.
	TraceMooncake = "mooncake"
	// TraceAzure is the Azure LLM inference trace's CSV: a header naming
	// TIMESTAMP, ContextTokens and GeneratedTokens (any order, other
	// columns ignored), timestamps like 2023-11-16 18:15:46.6805900.
	TraceAzure = "azure"
	// TraceJSONL is streamgate's own JSON lines: {"at_ms": offset,
	// "prompt": "..." and/or "input_tokens": N, "output_tokens": N,
	// "session": "..."}.
	TraceJSONL = "jsonl"
)

// TraceFormats lists the trace formats.
var TraceFormats = []string{TraceMooncake, TraceAzure, TraceJSONL}

// BlockTokens is the prompt tokens of one Mooncake hash block.
const BlockTokens = 512

// Bounds of a trace file: a longer line, a larger count or more entries in
// the window are errors naming the file and line.
const (
	MaxTraceLine    = 8 << 20 // bytes of one line (a JSONL prompt included)
	MaxTraceEntries = 1 << 21 // entries kept (inside the window)
	MaxTraceBlocks  = 1 << 14 // hash ids of one entry (8M tokens)
	MaxTraceInput   = 1 << 23 // recorded prompt tokens of one entry
	MaxTraceOutput  = 1 << 20 // recorded output tokens of one entry (the sim's X-Sim-Tokens bound)
	maxTraceMs      = 1e13    // timestamps and offsets in ms (about 300 years)
)

// TraceEntry is one recorded request.
type TraceEntry struct {
	// At is the arrival offset from the trace's first row, before
	// --trace-window and --trace-speed.
	At   time.Duration
	Line int // the entry's line in its file, for messages
	// InputTokens is the recorded prompt length; 0 with Prompt set means
	// the trace does not record it.
	InputTokens int
	// OutputTokens is the recorded output length, sent as max_tokens (at
	// least 1) and as X-Sim-Tokens.
	OutputTokens int
	// Prompt is the recorded prompt text (JSONL only); "" synthesises one
	// of InputTokens tokens from Blocks, Session or the entry's index.
	Prompt string
	// Blocks are the ids of the prompt's BlockTokens-token blocks, in
	// order (Mooncake's hash_ids): the same id gives the same text.
	Blocks []uint64
	// Session groups JSONL entries: their synthesised prompts are
	// beginnings of one text of the session's, so a later, longer turn
	// extends an earlier one's prompt.
	Session string
}

// Trace is a recorded arrival schedule with token lengths, its entries in
// time order and inside the window it was read with.
type Trace struct {
	File    string
	Format  string
	Window  TraceWindow
	Entries []TraceEntry
}

// TraceWindow is a slice of a trace's time, from its first row: entries
// with Start <= At < End are kept, shifted so Start is the replay's 0.
// End 0 means to the end.
type TraceWindow struct {
	Start, End time.Duration
}

// IsZero reports whether the window is the whole trace.
func (w TraceWindow) IsZero() bool { return w == TraceWindow{} }

func (w TraceWindow) String() string {
	if w.IsZero() {
		return ""
	}
	if w.End == 0 {
		return w.Start.String() + ":"
	}
	return w.Start.String() + ":" + w.End.String()
}

func (w TraceWindow) holds(at time.Duration) bool {
	return at >= w.Start && (w.End == 0 || at < w.End)
}

// ParseTraceWindow reads "END" (from the start: "10m"), "START:END",
// "START:" (to the end) or "START-END", in Go durations.
func ParseTraceWindow(s string) (TraceWindow, error) {
	var w TraceWindow
	s = strings.TrimSpace(s)
	if s == "" {
		return w, nil
	}
	bad := func() (TraceWindow, error) {
		return TraceWindow{}, fmt.Errorf("trace window %q: want END, START:END or START: in durations like 5m (START < END)", s)
	}
	start, end, cut := strings.Cut(s, ":")
	if !cut {
		start, end, cut = strings.Cut(s, "-")
	}
	if !cut {
		start, end = "0s", s
	}
	var err error
	if w.Start, err = time.ParseDuration(strings.TrimSpace(start)); err != nil || w.Start < 0 {
		return bad()
	}
	if end = strings.TrimSpace(end); end != "" {
		if w.End, err = time.ParseDuration(end); err != nil || w.End <= w.Start {
			return bad()
		}
	} else if !cut {
		return bad()
	}
	return w, nil
}

// LoadTrace reads the trace file path in format ("" detects it: see
// DetectTraceFormat), keeping the entries inside window.
func LoadTrace(path, format string, window TraceWindow) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if format == "" {
		head, _ := br.Peek(64 << 10)
		if format, err = DetectTraceFormat(path, head); err != nil {
			return nil, err
		}
	}
	return ReadTrace(br, path, format, window)
}

// DetectTraceFormat names the format of a trace from its file name (.csv:
// azure) or its first line: a CSV header with TIMESTAMP is azure, a JSON
// object with hash_ids or input_length is mooncake, one with at_ms is jsonl.
func DetectTraceFormat(name string, head []byte) (string, error) {
	if strings.EqualFold(filepath.Ext(name), ".csv") {
		return TraceAzure, nil
	}
	for len(head) > 0 {
		line, rest, _ := bytes.Cut(head, []byte{'\n'})
		head = rest
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			if bytes.Contains(bytes.ToUpper(line), []byte("TIMESTAMP")) {
				return TraceAzure, nil
			}
			break
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(line, &keys) != nil {
			break
		}
		switch {
		case keys["hash_ids"] != nil || keys["input_length"] != nil:
			return TraceMooncake, nil
		case keys["at_ms"] != nil:
			return TraceJSONL, nil
		}
		break
	}
	return "", fmt.Errorf("trace %s: cannot tell its format from the first line: pass --trace-format %s", name, strings.Join(TraceFormats, "|"))
}

// ReadTrace reads a trace in format from r; name is used in errors
// ("name:line: ..."). Arrival offsets are from the first row's time (a
// row before it is an error), entries outside window are dropped, and
// the rest are returned in time order (rows of one time in file order),
// shifted so the window's start is 0. Blank lines are skipped.
func ReadTrace(r io.Reader, name, format string, window TraceWindow) (*Trace, error) {
	var parse func(line []byte, n int) (TraceEntry, float64, error)
	switch format {
	case TraceMooncake:
		parse = parseMooncake
	case TraceJSONL:
		parse = parseTraceJSONL
	case TraceAzure:
		var az azureColumns
		parse = az.parse
	default:
		return nil, fmt.Errorf("trace format %q: want one of %s", format, strings.Join(TraceFormats, ", "))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxTraceLine)
	t := &Trace{File: name, Format: format, Window: window}
	line, rows := 0, 0
	var first float64 // the first row's time in ms (Azure: since the epoch)
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		e, ms, err := parse(b, line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if e.Line == 0 { // the CSV header
			continue
		}
		if rows == 0 {
			first = ms
		}
		rows++
		off := ms - first
		if off < 0 {
			return nil, fmt.Errorf("%s:%d: arrival %.3f ms before the first row's: the trace must begin with its earliest request", name, line, -off)
		}
		if off > maxTraceMs {
			return nil, fmt.Errorf("%s:%d: arrival %.0f ms after the first row's: too far", name, line, off)
		}
		e.At = time.Duration(math.Round(off * 1e6))
		if !window.holds(e.At) {
			continue
		}
		if len(t.Entries) == MaxTraceEntries {
			return nil, fmt.Errorf("%s:%d: more than %d entries in the window: pass a shorter --trace-window", name, line, MaxTraceEntries)
		}
		e.At -= window.Start
		t.Entries = append(t.Entries, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, MaxTraceLine)
		}
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if rows == 0 {
		return nil, fmt.Errorf("%s: no requests in the trace", name)
	}
	if len(t.Entries) == 0 {
		return nil, fmt.Errorf("%s: no requests in the window %s (the trace's %d rows span from its first row)", name, window, rows)
	}
	slices.SortStableFunc(t.Entries, func(a, b TraceEntry) int { return cmp.Compare(a.At, b.At) })
	return t, nil
}

// tokenCount checks a recorded token count read as a float64 (JSON).
func tokenCount(field string, v float64, min, max int) (int, error) {
	if v != math.Trunc(v) || v < float64(min) || v > float64(max) {
		return 0, fmt.Errorf("%s %v: want an integer in [%d, %d]", field, v, min, max)
	}
	return int(v), nil
}

func parseMooncake(line []byte, n int) (TraceEntry, float64, error) {
	var row struct {
		Timestamp *float64 `json:"timestamp"`
		Input     *float64 `json:"input_length"`
		Output    *float64 `json:"output_length"`
		HashIDs   []uint64 `json:"hash_ids"`
	}
	if err := json.Unmarshal(line, &row); err != nil {
		return TraceEntry{}, 0, fmt.Errorf("mooncake: %w", err)
	}
	switch {
	case row.Timestamp == nil:
		return TraceEntry{}, 0, errors.New(`mooncake: no "timestamp" (ms)`)
	case row.Input == nil:
		return TraceEntry{}, 0, errors.New(`mooncake: no "input_length"`)
	case row.Output == nil:
		return TraceEntry{}, 0, errors.New(`mooncake: no "output_length"`)
	case !(*row.Timestamp >= 0 && *row.Timestamp <= maxTraceMs):
		return TraceEntry{}, 0, fmt.Errorf("mooncake: timestamp %v: want milliseconds in [0, %g]", *row.Timestamp, maxTraceMs)
	case len(row.HashIDs) > MaxTraceBlocks:
		return TraceEntry{}, 0, fmt.Errorf("mooncake: %d hash_ids: at most %d", len(row.HashIDs), MaxTraceBlocks)
	}
	e := TraceEntry{Line: n}
	var err error
	if e.InputTokens, err = tokenCount("input_length", *row.Input, 1, MaxTraceInput); err != nil {
		return e, 0, err
	}
	if e.OutputTokens, err = tokenCount("output_length", *row.Output, 0, MaxTraceOutput); err != nil {
		return e, 0, err
	}
	e.Blocks = row.HashIDs
	return e, *row.Timestamp, nil
}

func parseTraceJSONL(line []byte, n int) (TraceEntry, float64, error) {
	var row struct {
		AtMs    *float64 `json:"at_ms"`
		Prompt  *string  `json:"prompt"`
		Input   *float64 `json:"input_tokens"`
		Output  *float64 `json:"output_tokens"`
		Session string   `json:"session"`
	}
	if err := json.Unmarshal(line, &row); err != nil {
		return TraceEntry{}, 0, err
	}
	switch {
	case row.AtMs == nil:
		return TraceEntry{}, 0, errors.New(`no "at_ms" (the arrival in ms)`)
	case !(*row.AtMs >= 0 && *row.AtMs <= maxTraceMs):
		return TraceEntry{}, 0, fmt.Errorf("at_ms %v: want milliseconds in [0, %g]", *row.AtMs, maxTraceMs)
	case row.Output == nil:
		return TraceEntry{}, 0, errors.New(`no "output_tokens"`)
	case row.Prompt == nil && row.Input == nil:
		return TraceEntry{}, 0, errors.New(`want "prompt" or "input_tokens"`)
	case row.Prompt != nil && *row.Prompt == "":
		return TraceEntry{}, 0, errors.New(`"prompt" is empty`)
	case len(row.Session) > 1024:
		return TraceEntry{}, 0, errors.New(`"session" longer than 1024 bytes`)
	}
	e := TraceEntry{Line: n, Session: row.Session}
	var err error
	if row.Prompt != nil {
		e.Prompt = *row.Prompt
	}
	if row.Input != nil {
		if e.InputTokens, err = tokenCount("input_tokens", *row.Input, 1, MaxTraceInput); err != nil {
			return e, 0, err
		}
	}
	if e.OutputTokens, err = tokenCount("output_tokens", *row.Output, 0, MaxTraceOutput); err != nil {
		return e, 0, err
	}
	return e, *row.AtMs, nil
}

// azureColumns are the positions of the Azure trace's columns, read from
// its header.
type azureColumns struct {
	ts, in, out, n int
	seen           bool
}

// parse reads the header (returning an entry of Line 0) or a row.
func (c *azureColumns) parse(line []byte, n int) (TraceEntry, float64, error) {
	fields := strings.Split(string(line), ",")
	for i, f := range fields {
		fields[i] = strings.Trim(strings.TrimSpace(f), `"`)
	}
	if !c.seen {
		c.ts, c.in, c.out = -1, -1, -1
		for i, f := range fields {
			switch strings.ToLower(f) {
			case "timestamp":
				c.ts = i
			case "contexttokens":
				c.in = i
			case "generatedtokens":
				c.out = i
			}
		}
		if c.ts < 0 || c.in < 0 || c.out < 0 {
			return TraceEntry{}, 0, fmt.Errorf("azure: header %q: want the columns TIMESTAMP, ContextTokens and GeneratedTokens", clip(line))
		}
		c.seen, c.n = true, len(fields)
		return TraceEntry{}, 0, nil
	}
	if len(fields) != c.n {
		return TraceEntry{}, 0, fmt.Errorf("azure: %d fields, the header has %d", len(fields), c.n)
	}
	ts, err := parseAzureTime(fields[c.ts])
	if err != nil {
		return TraceEntry{}, 0, err
	}
	e := TraceEntry{Line: n}
	if e.InputTokens, err = csvCount("ContextTokens", fields[c.in], 1, MaxTraceInput); err != nil {
		return e, 0, err
	}
	if e.OutputTokens, err = csvCount("GeneratedTokens", fields[c.out], 0, MaxTraceOutput); err != nil {
		return e, 0, err
	}
	return e, ts, nil
}

func csvCount(field, s string, min, max int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < min || v > max {
		return 0, fmt.Errorf("azure: %s %q: want an integer in [%d, %d]", field, s, min, max)
	}
	return v, nil
}

// parseAzureTime reads an Azure trace timestamp (2023-11-16
// 18:15:46.6805900, any number of fractional digits, an optional zone)
// as milliseconds since the epoch.
func parseAzureTime(s string) (float64, error) {
	for _, layout := range []string{"2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return float64(t.UnixNano()) / 1e6, nil
		}
	}
	return 0, fmt.Errorf("azure: TIMESTAMP %q: want a time like 2023-11-16 18:15:46.6805900", s)
}

// Span is the time from the first to the last entry.
func (t *Trace) Span() time.Duration {
	if len(t.Entries) == 0 {
		return 0
	}
	return t.Entries[len(t.Entries)-1].At - t.Entries[0].At
}
