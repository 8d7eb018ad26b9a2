package fit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/streamgate/streamgate/internal/api"
)

// request returns body and its decoded view, as the gateway holds them.
func request(t testing.TB, body string) ([]byte, *api.ChatRequest) {
	t.Helper()
	var chat api.ChatRequest
	if err := json.Unmarshal([]byte(body), &chat); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return []byte(body), &chat
}

// messagesBody returns a request body with the given messages and extra
// members (written before "messages").
func messagesBody(extra string, msgs ...string) string {
	return `{"model":"m",` + extra + `"messages":[` + strings.Join(msgs, ",") + `]}`
}

// tokens is the guard's estimate of messages.
func tokens(msgs ...string) int {
	n := 0
	for _, m := range msgs {
		n += EstimateTokens(m)
	}
	return n
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func TestEstimateTokens(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		want    int
	}{
		{"empty", "", 0},
		{"one ASCII byte", "a", 1},
		{"four ASCII bytes", "abcd", 1},
		{"five ASCII bytes", "abcde", 2},
		{"Korean", "안녕하세요", 5},
		{"Korean and ASCII", "안녕 hi", 2 + 1},
		{"emoji", "😀😀", 2},
		{"Japanese", "こんにちは世界", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := EstimateTokens(tc.s); got != tc.want {
				t.Errorf("EstimateTokens(%q) = %d, want %d", tc.s, got, tc.want)
			}
			if got := EstimateTokens([]byte(tc.s)); got != tc.want {
				t.Errorf("EstimateTokens([]byte(%q)) = %d, want %d", tc.s, got, tc.want)
			}
		})
	}
}

const (
	sys   = `{"role":"system","content":"You are terse."}`
	dev   = `{"role":"developer","content":"Answer in English."}`
	u1    = `{"role":"user","content":"What is the capital of France? Please explain at length."}`
	a1    = `{"role":"assistant","content":"Paris. It has been the capital for a long time."}`
	u2    = `{"role":"user","content":"And of Germany?"}`
	a2    = `{"role":"assistant","content":"Berlin."}`
	u3    = `{"role":"user","content":"And of Italy?"}`
	aTool = `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}},{"id":"c2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]}`
	tool1 = `{"role":"tool","tool_call_id":"c1","content":"sunny, 24 degrees, light wind from the west"}`
	tool2 = `{"role":"tool","tool_call_id":"c2","content":"rain, 9 degrees"}`
	aDone = `{"role":"assistant","content":"Rome is sunny; Oslo is rainy."}`
)

func TestApplyFits(t *testing.T) {
	msgs := []string{sys, u1, a1, u2}
	for _, tc := range []struct {
		name  string
		extra string
		l     Limits
		want  Result
	}{
		{"no max_tokens", ``, Limits{Window: tokens(msgs...)}, Result{PromptTokens: tokens(msgs...)}},
		{"max_tokens exactly fits", `"max_tokens":100,`, Limits{Window: tokens(msgs...) + 100, MaxOutput: 100},
			Result{PromptTokens: tokens(msgs...), MaxTokens: 100}},
		{"max_completion_tokens fits", `"max_completion_tokens":10,"max_tokens":20,`, Limits{Window: 1000, MaxOutput: 100},
			Result{PromptTokens: tokens(msgs...), MaxTokens: 10}},
		{"trim policy, nothing to trim", `"max_tokens":100,`, Limits{Window: 1000, Policy: PolicyTrim},
			Result{PromptTokens: tokens(msgs...), MaxTokens: 100}},
		{"unknown limits", `"max_tokens":100000,`, Limits{}, Result{MaxTokens: 100000}},
		{"unknown window, max_tokens under MaxOutput", `"max_tokens":10,`, Limits{MaxOutput: 100}, Result{MaxTokens: 10}},
		{"tools counted", `"tools":[{"type":"function","function":{"name":"f"}}],`,
			Limits{Window: tokens(msgs...) + EstimateTokens(`[{"type":"function","function":{"name":"f"}}]`)},
			Result{PromptTokens: tokens(msgs...) + EstimateTokens(`[{"type":"function","function":{"name":"f"}}]`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, chat := request(t, messagesBody(tc.extra, msgs...))
			before := *chat
			out, res, err := Apply(body, chat, tc.l)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !sameSlice(out, body) {
				t.Errorf("got a new body %s, want body itself", out)
			}
			if res != tc.want {
				t.Errorf("got %+v, want %+v", res, tc.want)
			}
			if chat.MaxTokens != before.MaxTokens || chat.MaxCompletionTokens != before.MaxCompletionTokens || len(chat.Messages) != len(before.Messages) {
				t.Errorf("got chat changed, want it as it was")
			}
		})
	}
}

func TestApplyFitsAllocs(t *testing.T) {
	body, chat := request(t, messagesBody(`"max_tokens":100,"tools":[{"type":"function","function":{"name":"f"}}],`, sys, u1, a1, u2))
	l := Limits{Window: 8192, MaxOutput: 4096}
	if n := testing.AllocsPerRun(100, func() { Apply(body, chat, l) }); n != 0 {
		t.Errorf("got %v allocations, want 0", n)
	}
}

func TestApplyClamp(t *testing.T) {
	for _, tc := range []struct {
		name       string
		body       string
		l          Limits
		want       string
		wantMax    int
		wantM      *int // chat's max_tokens after, nil: unset
		wantMC     *int // chat's max_completion_tokens after
		wantResult Result
	}{
		{"max_tokens", `{"model":"m","max_tokens":9000,"messages":[{"role":"user","content":"hi"}],"x":{"max_tokens":9000}}`,
			Limits{MaxOutput: 4096},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":"hi"}],"x":{"max_tokens":9000}}`,
			4096, new(4096), nil, Result{MaxTokens: 4096, Clamped: true}},
		{"max_completion_tokens", `{"model":"m", "max_completion_tokens" : 9000, "messages":[{"role":"user","content":"hi"}]}`,
			Limits{MaxOutput: 4096, Window: 100000},
			`{"model":"m","max_completion_tokens":4096,"messages":[{"role":"user","content":"hi"}]}`,
			4096, nil, new(4096), Result{MaxTokens: 4096, Clamped: true, PromptTokens: EstimateTokens(`{"role":"user","content":"hi"}`)}},
		{"both above", `{"max_tokens":9000,"max_completion_tokens":5000,"messages":[]}`,
			Limits{MaxOutput: 4096},
			`{"max_tokens":4096,"max_completion_tokens":4096,"messages":[]}`,
			4096, new(4096), new(4096), Result{MaxTokens: 4096, Clamped: true}},
		{"max_tokens above, max_completion_tokens under", `{"max_tokens":9000,"max_completion_tokens":100,"messages":[]}`,
			Limits{MaxOutput: 4096},
			`{"max_tokens":4096,"max_completion_tokens":100,"messages":[]}`,
			100, new(4096), new(100), Result{MaxTokens: 100, Clamped: true}},
		{"clamped then fits", `{"max_tokens":9000,"messages":[{"role":"user","content":"hi"}]}`,
			Limits{MaxOutput: 4096, Window: 4096 + 10},
			`{"max_tokens":4096,"messages":[{"role":"user","content":"hi"}]}`,
			4096, new(4096), nil, Result{MaxTokens: 4096, Clamped: true, PromptTokens: EstimateTokens(`{"role":"user","content":"hi"}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, chat := request(t, tc.body)
			out, res, err := Apply(body, chat, tc.l)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if string(out) != tc.want {
				t.Errorf("got %s, want %s", out, tc.want)
			}
			if string(body) != tc.body {
				t.Errorf("got the input body changed to %s, want %s", body, tc.body)
			}
			if res != tc.wantResult {
				t.Errorf("got %+v, want %+v", res, tc.wantResult)
			}
			if got := chat.OutputLimit(); got != tc.wantMax {
				t.Errorf("got chat's output limit %d, want %d", got, tc.wantMax)
			}
			for _, f := range []struct {
				name      string
				got, want *int
			}{{"max_tokens", chat.MaxTokens, tc.wantM}, {"max_completion_tokens", chat.MaxCompletionTokens, tc.wantMC}} {
				if (f.got == nil) != (f.want == nil) || f.got != nil && *f.got != *f.want {
					t.Errorf("got chat's %s %v, want %v", f.name, ptr(f.got), ptr(f.want))
				}
			}
		})
	}
}

func ptr(p *int) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func TestApplyReject(t *testing.T) {
	msgs := []string{sys, u1, a1, u2}
	prompt := tokens(msgs...)
	for _, tc := range []struct {
		name  string
		extra string
		l     Limits
		want  TooLong
		msg   string
	}{
		{"prompt and max_tokens", `"max_tokens":1000,`, Limits{Window: prompt + 999},
			TooLong{Window: prompt + 999, Prompt: prompt, MaxTokens: 1000, Trimmable: true},
			fmt.Sprintf("this model's context window is %d tokens, but the request needs about %d (prompt about %d estimated + max_tokens 1000): shorten the messages or lower max_tokens", prompt+999, prompt+1000, prompt)},
		{"prompt alone", ``, Limits{Window: prompt - 1, Policy: PolicyReject},
			TooLong{Window: prompt - 1, Prompt: prompt, Trimmable: true},
			fmt.Sprintf("this model's context window is %d tokens, but the messages need about %d (estimated): shorten the messages", prompt-1, prompt)},
		{"clamped max_tokens still too many", `"max_tokens":9000,`, Limits{Window: prompt + 100, MaxOutput: 4096},
			TooLong{Window: prompt + 100, Prompt: prompt, MaxTokens: 4096},
			fmt.Sprintf("this model's context window is %d tokens, but the request needs about %d (prompt about %d estimated + max_tokens 4096): shorten the messages or lower max_tokens", prompt+100, prompt+4096, prompt)},
		{"max_tokens near MaxInt", `"max_tokens":9223372036854775807,`, Limits{Window: 128000},
			TooLong{Window: 128000, Prompt: prompt, MaxTokens: math.MaxInt},
			fmt.Sprintf("this model's context window is 128000 tokens, but the request needs about %d (prompt about %d estimated + max_tokens %d): shorten the messages or lower max_tokens", math.MaxInt, prompt, math.MaxInt)},
		{"not trimmable", ``, Limits{Window: tokens(sys, u2) - 1},
			TooLong{Window: tokens(sys, u2) - 1, Prompt: prompt}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, chat := request(t, messagesBody(tc.extra, msgs...))
			orig := string(body)
			out, _, err := Apply(body, chat, tc.l)
			var tl *TooLong
			if !errors.As(err, &tl) {
				t.Fatalf("got %s, %v, want a *TooLong", out, err)
			}
			if *tl != tc.want {
				t.Errorf("got %+v, want %+v", *tl, tc.want)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("got message %q, want %q", err, tc.msg)
			}
			if out != nil || string(body) != orig || len(chat.Messages) != len(msgs) {
				t.Errorf("got body %s and %d messages, want nil and the request unchanged", out, len(chat.Messages))
			}
		})
	}
}

func TestApplyTrim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		msgs   []string
		extra  string
		window int
		want   []string // the messages sent; nil: a *TooLong
	}{
		{"keeps system and newest, drops oldest",
			[]string{sys, u1, a1, u2, a2, u3}, ``, tokens(sys, u2, a2, u3),
			[]string{sys, u2, a2, u3}},
		{"drops only what it must",
			[]string{sys, u1, a1, u2, a2, u3}, ``, tokens(sys, u1, a1, u2, a2, u3) - 1,
			[]string{sys, u2, a2, u3}},
		{"reserves max_tokens",
			[]string{sys, u1, a1, u2, a2, u3}, `"max_tokens":50,`, tokens(sys, u2, a2, u3) + 49,
			[]string{sys, u3}},
		{"system and developer kept in place",
			[]string{sys, u1, dev, a1, u2, a2, u3}, ``, tokens(sys, dev, u3),
			[]string{sys, dev, u3}},
		{"tool calls leave with their results",
			[]string{sys, u1, aTool, tool1, tool2, aDone, u2, a2, u3}, ``, tokens(sys, u2, a2, u3),
			[]string{sys, u2, a2, u3}},
		{"tool results of the last turn kept",
			[]string{sys, u1, a1, u2, aTool, tool1, tool2}, ``, tokens(sys, u2, aTool, tool1, tool2),
			[]string{sys, u2, aTool, tool1, tool2}},
		{"messages before the first user message are a turn",
			[]string{sys, a1, u2, a2, u3}, ``, tokens(sys, u2, a2, u3),
			[]string{sys, u2, a2, u3}},
		{"last user message never dropped",
			[]string{sys, u1, a1, u3}, ``, tokens(sys, u3) - 1,
			nil},
		{"last turn never dropped",
			[]string{sys, u1, a1, u2, aTool, tool1, tool2}, ``, tokens(sys, u2, aTool, tool1),
			nil},
		{"no user message: nothing to drop",
			[]string{sys, a1, a2}, ``, tokens(sys, a1, a2) - 1,
			nil},
		{"tools alone too many",
			[]string{u1, a1, u3}, `"tools":[{"type":"function","function":{"name":"f","description":"` + strings.Repeat("x", 400) + `"}}],`, 100,
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := messagesBody(tc.extra, tc.msgs...)
			body, chat := request(t, src)
			var reserve int
			if chat.MaxTokens != nil {
				reserve = *chat.MaxTokens
			}
			out, res, err := Apply(body, chat, Limits{Window: tc.window, Policy: PolicyTrim})
			if tc.want == nil {
				var tl *TooLong
				if !errors.As(err, &tl) || tl.Trimmable {
					t.Fatalf("got %s, %v, want a *TooLong not trimmable", out, err)
				}
				if tl.MaxTokens <= tc.window-tl.Prompt {
					t.Errorf("got %+v: fits the window %d, want it not to", *tl, tc.window)
				}
				if len(chat.Messages) != len(tc.msgs) {
					t.Errorf("got %d messages in chat, want %d as they were", len(chat.Messages), len(tc.msgs))
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			want := messagesBody(tc.extra, tc.want...)
			if string(out) != want {
				t.Errorf("got  %s\nwant %s", out, want)
			}
			if string(body) != src {
				t.Errorf("got the input body changed")
			}
			wantRes := Result{PromptTokens: tokens(tc.want...), MaxTokens: reserve, Dropped: len(tc.msgs) - len(tc.want)}
			if res != wantRes {
				t.Errorf("got %+v, want %+v", res, wantRes)
			}
			_, wantChat := request(t, want)
			if got, w := roles(chat.Messages), roles(wantChat.Messages); got != w {
				t.Errorf("got chat messages %s, want %s", got, w)
			}
		})
	}
}

func roles(ms []api.Message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s:%s%s;", m.Role, m.Content, m.ToolCallID)
	}
	return b.String()
}

func TestApplyKorean(t *testing.T) {
	text := strings.Repeat("안녕하세요 ", 200) // 1,000 Hangul syllables, 200 spaces, 3,200 bytes
	msg := `{"role":"user","content":"` + text + `"}`
	body, chat := request(t, messagesBody(`"max_tokens":100,`, msg))
	want := (len(`{"role":"user","content":""}`)+200+3)/4 + 1000
	// A token per syllable: far above the 800 a bytes/4 rule would give.
	if got := EstimateTokens(msg); got != want || got < 1000 {
		t.Fatalf("got estimate %d, want %d (at least one per syllable)", got, want)
	}
	_, res, err := Apply(body, chat, Limits{Window: want + 100})
	if err != nil || res.PromptTokens != want {
		t.Errorf("got %+v, %v, want prompt %d and no error", res, err, want)
	}
	if _, _, err := Apply(body, chat, Limits{Window: len(msg)/4 + 100}); err == nil {
		t.Errorf("got no error for a window of bytes/4 + max_tokens, want a *TooLong")
	}
}

func TestApplyErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, chat string }{
		{"not an object", `[1]`, `{"messages":[{"role":"user","content":"x"}]}`},
		{"messages not an array", `{"messages":"x"}`, `{"messages":[{"role":"user","content":"x"}]}`},
		{"chat does not match body", `{"messages":[{"role":"user","content":"x"}]}`,
			`{"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, chat := request(t, tc.chat)
			out, _, err := Apply([]byte(tc.body), chat, Limits{Window: 1, Policy: PolicyTrim})
			var tl *TooLong
			if err == nil || errors.As(err, &tl) {
				t.Errorf("got %s, %v, want an error that is not a *TooLong", out, err)
			}
		})
	}
}

func TestApplyEmptyBody(t *testing.T) {
	out, res, err := Apply(nil, &api.ChatRequest{}, Limits{Window: 10, MaxOutput: 5})
	if err != nil || out != nil || res != (Result{}) {
		t.Errorf("got %q, %+v, %v, want nil, zero result, no error", out, res, err)
	}
}

// bigRequest returns a body of about 1 MB: a system message, n turns of a
// user and an assistant message, and a last question.
func bigRequest(t testing.TB) (string, []string) {
	msgs := []string{sys}
	size := 0
	for i := 0; size < 1<<20; i++ {
		u := fmt.Sprintf(`{"role":"user","content":"question %d: %s"}`, i, strings.Repeat("lorem ipsum ", 40))
		a := fmt.Sprintf(`{"role":"assistant","content":"answer %d: %s"}`, i, strings.Repeat("dolor sit amet 한국어 ", 30))
		msgs = append(msgs, u, a)
		size += len(u) + len(a)
	}
	msgs = append(msgs, u3)
	return messagesBody(`"max_tokens":1000,"temperature":0.2,`, msgs...), msgs
}

func TestApply1MB(t *testing.T) {
	src, msgs := bigRequest(t)
	if len(src) < 1<<20 {
		t.Fatalf("got a body of %d bytes, want at least 1 MB", len(src))
	}
	prompt := tokens(msgs...)

	body, chat := request(t, src)
	out, res, err := Apply(body, chat, Limits{Window: prompt + 1000, MaxOutput: 1000})
	if err != nil || !sameSlice(out, body) || res.PromptTokens != prompt {
		t.Fatalf("fitting: got %d bytes, %+v, %v, want body itself, prompt %d", len(out), res, err, prompt)
	}

	window := 8192
	out, res, err = Apply(body, chat, Limits{Window: window, MaxOutput: 1000, Policy: PolicyTrim})
	if err != nil {
		t.Fatalf("trim: got error %v, want none", err)
	}
	if res.MaxTokens > window-res.PromptTokens || res.Dropped == 0 {
		t.Errorf("trim: got %+v, want prompt + max_tokens ≤ %d and messages dropped", res, window)
	}
	var sent api.ChatRequest
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatalf("trim: got invalid JSON: %v", err)
	}
	if n := len(sent.Messages); n != len(msgs)-res.Dropped || n != len(chat.Messages) {
		t.Errorf("trim: got %d messages sent and %d in chat, want %d", n, len(chat.Messages), len(msgs)-res.Dropped)
	}
	if sent.Messages[0].Role != "system" || sent.Messages[1].Role != "user" || sent.Messages[len(sent.Messages)-1].Text() != "And of Italy?" {
		t.Errorf("trim: got %s first, %s second, %q last, want system, user, the last question",
			sent.Messages[0].Role, sent.Messages[1].Role, sent.Messages[len(sent.Messages)-1].Text())
	}
	if !bytes.HasPrefix(out, []byte(`{"model":"m","max_tokens":1000,"temperature":0.2,"messages":[`+sys+`,`)) {
		t.Errorf("trim: got the other members changed: %.120s", out)
	}
}

func BenchmarkApply(b *testing.B) {
	small, _ := request(b, messagesBody(`"max_tokens":100,"stream":true,`, sys, u1, a1, u2, aTool, tool1, tool2, aDone, u3))
	_, smallChat := request(b, string(small))
	bigSrc, _ := bigRequest(b)
	big, bigChat := request(b, bigSrc)
	for _, bc := range []struct {
		name string
		body []byte
		chat *api.ChatRequest
		l    Limits
	}{
		{"fits", small, smallChat, Limits{Window: 128000, MaxOutput: 16384}},
		{"fits 1MB", big, bigChat, Limits{Window: 1 << 30, MaxOutput: 16384}},
		{"clamp", small, smallChat, Limits{Window: 128000, MaxOutput: 50}},
		{"trim 1MB", big, bigChat, Limits{Window: 8192, MaxOutput: 1000, Policy: PolicyTrim}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				chat := *bc.chat // Apply updates chat when it rewrites
				if _, _, err := Apply(bc.body, &chat, bc.l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzApply checks that Apply never panics on a body the gateway would
// accept, and that what it sends is valid JSON whose messages are a
// subsequence of the client's, that fits the window, and that chat
// describes.
func FuzzApply(f *testing.F) {
	f.Add([]byte(messagesBody(`"max_tokens":100,`, sys, u1, a1, u2, a2, u3)), 60, 50, true)
	f.Add([]byte(messagesBody(`"max_completion_tokens":9000,`, sys, u1, aTool, tool1, tool2, aDone, u2)), 200, 4096, true)
	f.Add([]byte(messagesBody(``, dev, a1, u2, aTool, tool1)), 30, 0, false)
	f.Add([]byte(`{"messages":null,"max_tokens":-1}`), 1, 1, true)
	f.Add([]byte(`{"messages":[{"role":"user","content":"a"}],"max_tokens":9223372036854775807}`), 100, 0, true)
	f.Add([]byte(`{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"},{"role":"user","content":"c"}]}`), 12, 0, true)
	f.Add([]byte(`{"mess\u0061ges":[{"role":"user","content":[{"type":"text","text":"안녕"}]},{"role":"user","content":"x"}],"max_tokens":5}`), 14, 3, true)
	f.Fuzz(func(t *testing.T, body []byte, window, maxOutput int, trim bool) {
		var chat api.ChatRequest
		if json.Unmarshal(body, &chat) != nil {
			return // the gateway refuses it
		}
		if foldedName(body) {
			return // encoding/json's view differs from the upstream's (see foldedName)
		}
		l := Limits{Window: window, MaxOutput: maxOutput}
		if trim {
			l.Policy = PolicyTrim
		}
		in := bytes.Clone(body)
		n := len(chat.Messages)
		out, res, err := Apply(body, &chat, l)
		if !bytes.Equal(body, in) {
			t.Fatalf("Apply(%q) changed its input", in)
		}
		if err != nil {
			if out != nil || len(chat.Messages) != n {
				t.Fatalf("Apply(%q) = %q, %v: want nil and chat as it was", in, out, err)
			}
			return
		}
		var sent api.ChatRequest
		if err := json.Unmarshal(out, &sent); err != nil {
			t.Fatalf("Apply(%q) = %q: invalid: %v", in, out, err)
		}
		if len(sent.Messages) != len(chat.Messages) || sent.OutputLimit() != chat.OutputLimit() {
			t.Fatalf("Apply(%q) = %q: chat has %d messages and limit %d, want %d and %d",
				in, out, len(chat.Messages), chat.OutputLimit(), len(sent.Messages), sent.OutputLimit())
		}
		var before, after struct{ Messages []json.RawMessage }
		json.Unmarshal(in, &before)
		json.Unmarshal(out, &after)
		j := 0
		for _, m := range after.Messages {
			for j < len(before.Messages) && !bytes.Equal(before.Messages[j], m) {
				j++
			}
			if j == len(before.Messages) {
				t.Fatalf("Apply(%q) = %q: messages are not a subsequence of the input's", in, out)
			}
			j++
		}
		if len(after.Messages) != len(before.Messages)-res.Dropped {
			t.Fatalf("Apply(%q) = %q: %d messages, want %d minus %d dropped", in, out, len(after.Messages), len(before.Messages), res.Dropped)
		}
		if window > 0 && max(res.MaxTokens, 0) > window-res.PromptTokens {
			t.Fatalf("Apply(%q) = %+v: does not fit %d", in, res, window)
		}
		if maxOutput > 0 && sent.OutputLimit() > maxOutput {
			t.Fatalf("Apply(%q) = %q: output limit %d above %d", in, out, sent.OutputLimit(), maxOutput)
		}
		if res.Dropped == 0 && !res.Clamped && !sameSlice(out, body) {
			t.Fatalf("Apply(%q) = %q: a copy when nothing changed", in, out)
		}
	})
}

// foldedName reports whether a member of body is named like one the guard
// reads but in other case ("Messages"): encoding/json matches struct fields
// case-insensitively, so chat then holds what an upstream, which matches
// names exactly, does not read as messages. Apply reads exact names.
func foldedName(body []byte) bool {
	folded := false
	api.EachMember(body, func(key, _, _ []byte) error {
		for _, name := range []string{"messages", "tools", "max_tokens", "max_completion_tokens"} {
			if string(key) != name && strings.EqualFold(string(key), name) {
				folded = true
			}
		}
		return nil
	})
	return folded
}

// TestCheck: a body the guard cannot read as a chat request (Anthropic's
// Messages API, passed through) is measured with its top-level system
// prompt, its max_tokens lowered (that member only), never trimmed.
func TestCheck(t *testing.T) {
	sys := strings.Repeat("a", 400) // 100 tokens
	msg := `{"role":"user","content":[{"type":"future_block","x":1}]}`
	body := `{"model":"m","max_tokens":500,"system":"` + sys + `","messages":[` + msg + `],"future":true}`
	prompt := EstimateTokens(`"`+sys+`"`) + EstimateTokens(msg)
	for _, tt := range []struct {
		name string
		l    Limits
		want string // the body returned; "" for *TooLong
	}{
		{"no limits", Limits{}, body},
		{"fits", Limits{Window: prompt + 500, MaxOutput: 500}, body},
		{"clamped", Limits{MaxOutput: 100}, strings.Replace(body, `"max_tokens":500`, `"max_tokens":100`, 1)},
		{"clamped to fit", Limits{Window: prompt + 100, MaxOutput: 100}, strings.Replace(body, `"max_tokens":500`, `"max_tokens":100`, 1)},
		{"too long, system counted", Limits{Window: prompt + 499, Policy: PolicyTrim}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, res, err := Check([]byte(body), tt.l)
			var tl *TooLong
			switch {
			case tt.want == "":
				if !errors.As(err, &tl) || tl.Prompt != prompt || tl.MaxTokens != 500 || tl.Trimmable {
					t.Errorf("got %s, %+v, %v; want a *TooLong with prompt %d and max_tokens 500, not trimmable", got, res, err, prompt)
				}
			case err != nil || string(got) != tt.want:
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}
