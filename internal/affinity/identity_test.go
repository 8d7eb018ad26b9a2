package affinity

import (
	"encoding/json"
	"testing"
)

func TestIdentifyOrder(t *testing.T) {
	all := Fields{PromptCacheKey: "pck", SessionID: "sid", MetadataUserID: "mu", User: "u", Prefix: 42}
	for _, tc := range []struct {
		name string
		mode Mode
		f    Fields
		want Source
	}{
		{"cache key first", Session, all, PromptCacheKey},
		{"header next", Session, Fields{SessionID: "sid", MetadataUserID: "mu", User: "u", Prefix: 42}, SessionHeader},
		{"metadata.user_id next", Session, Fields{MetadataUserID: "mu", User: "u", Prefix: 42}, MetadataUser},
		{"user next", Session, Fields{User: "u", Prefix: 42}, User},
		{"prefix last", Session, Fields{Prefix: 42}, PrefixHash},
		{"nothing", Session, Fields{}, None},
		{"prefix mode ignores ids", Prefix, all, PrefixHash},
		{"prefix mode without prefix", Prefix, Fields{SessionID: "sid"}, None},
		{"off", Off, all, None},
	} {
		got := Identify(tc.mode, tc.f)
		if got.Source != tc.want {
			t.Errorf("%s: source %v, want %v", tc.name, got.Source, tc.want)
		}
		if (got.Key == 0) != (tc.want == None) {
			t.Errorf("%s: key %#x with source %v", tc.name, got.Key, got.Source)
		}
	}
	// The same string from two sources is two sessions.
	a := Identify(Session, Fields{User: "x"}).Key
	b := Identify(Session, Fields{SessionID: "x"}).Key
	if a == b {
		t.Error("user x and session x share a key")
	}
	if Identify(Session, Fields{SessionID: "x"}) != Identify(Session, Fields{SessionID: "x", User: "y"}) {
		t.Error("the header's session changed with a lower-ranked field")
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{"": Off, "off": Off, "session": Session, "prefix": Prefix} {
		got, err := ParseMode(s)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, want)
		}
		if s != "" && got.String() != s {
			t.Errorf("Mode %v prints %q, want %q", got, got.String(), s)
		}
	}
	if _, err := ParseMode("sticky"); err == nil {
		t.Error(`ParseMode("sticky") accepted it`)
	}
}

// Chat turns of one conversation: the history grows, the client is the same.
const (
	chatTurn1 = `{"model":"m","tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object"}}}],
	  "messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"list /tmp"}],"stream":true}`
	chatTurn3 = `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object"}}}],
	  "messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"list /tmp"},
	  {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
	  {"role":"tool","tool_call_id":"c1","content":"a b"},{"role":"assistant","content":"a, b"},{"role":"user","content":"and /var?"}]}`
	chatOther = `{"model":"m","tools":[{"type":"function","function":{"name":"ls","parameters":{"type":"object"}}}],
	  "messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"list /home"}]}`
	chatNoTools = `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"list /tmp"}]}`
	// The same as turn 1, spaced out differently.
	chatSpaced = `{ "model" : "m" , "tools" : [ { "type" : "function" , "function" : { "name" : "ls" , "parameters" : { "type" : "object" } } } ] ,
	  "messages" : [ { "role" : "system" , "content" : "You are terse." } , { "role" : "user" , "content" : "list /tmp" } ] }`
)

func TestChatPrefix(t *testing.T) {
	t1, t3 := ChatPrefix([]byte(chatTurn1)), ChatPrefix([]byte(chatTurn3))
	if t1 == 0 || t1 != t3 {
		t.Fatalf("turn 1 %#x, turn 3 %#x: want one nonzero fingerprint per conversation", t1, t3)
	}
	if got := ChatPrefix([]byte(chatSpaced)); got != t1 {
		t.Errorf("whitespace changed the fingerprint: %#x, want %#x", got, t1)
	}
	if ChatPrefix([]byte(chatOther)) == t1 {
		t.Error("another first user turn gave the same fingerprint")
	}
	if ChatPrefix([]byte(chatNoTools)) == t1 {
		t.Error("dropping the tools kept the fingerprint")
	}
	if got := ChatPrefix([]byte(`{"model":"m"}`)); got != 0 {
		t.Errorf("no prefix: got %#x, want 0", got)
	}
	// Numbers are separated: [1,2] is not [12].
	a := ChatPrefix([]byte(`{"messages":[{"role":"user","content":[1,2]}]}`))
	b := ChatPrefix([]byte(`{"messages":[{"role":"user","content":[12]}]}`))
	if a == b {
		t.Error("[1,2] and [12] share a fingerprint")
	}
}

// Anthropic clients move cache_control to the newest turn.
const (
	msgTurn1 = `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"You code.","cache_control":{"type":"ephemeral"}}],
	  "messages":[{"role":"user","content":[{"type":"text","text":"fix the bug","cache_control":{"type":"ephemeral"}}]}]}`
	msgTurn2 = `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"You code.","cache_control":{"type":"ephemeral"}}],
	  "messages":[{"role":"user","content":[{"type":"text","text":"fix the bug"}]},{"role":"assistant","content":"done"},
	  {"role":"user","content":[{"type":"text","text":"thanks","cache_control":{"type":"ephemeral"}}]}],"metadata":{"user_id":"u1"}}`
	msgOtherSystem = `{"model":"claude","max_tokens":100,"system":"You write.",
	  "messages":[{"role":"user","content":[{"type":"text","text":"fix the bug"}]}]}`
)

func TestMessagesPrefix(t *testing.T) {
	t1, t2 := MessagesPrefix([]byte(msgTurn1)), MessagesPrefix([]byte(msgTurn2))
	if t1 == 0 || t1 != t2 {
		t.Fatalf("turn 1 %#x, turn 2 %#x (cache_control moved): want one nonzero fingerprint", t1, t2)
	}
	if MessagesPrefix([]byte(msgOtherSystem)) == t1 {
		t.Error("another system prompt gave the same fingerprint")
	}
}

func TestResponsesPrefix(t *testing.T) {
	const (
		turn1 = `{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":"hi"}]}`
		// Turn 2 resent whole.
		turn2Full = `{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":"hi"},
		  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]},{"role":"user","content":"more"}]}`
		// Turn 2 continuing the stored response: the input is the new turn only.
		turn2Cont = `{"model":"m","instructions":"Be brief.","previous_response_id":"resp_1","input":[{"role":"user","content":"more"}]}`
		turn1Str  = `{"model":"m","instructions":"Be brief.","input":"hi"}`
	)
	prior := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"hi"}`),
		json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}`),
	}
	t1 := ResponsesPrefix([]byte(turn1), nil)
	if t1 == 0 {
		t.Fatal("turn 1: no fingerprint")
	}
	if got := ResponsesPrefix([]byte(turn2Full), nil); got != t1 {
		t.Errorf("turn 2 resent whole: %#x, want %#x", got, t1)
	}
	if got := ResponsesPrefix([]byte(turn2Cont), prior); got != t1 {
		t.Errorf("turn 2 on previous_response_id: %#x, want %#x", got, t1)
	}
	if got := ResponsesPrefix([]byte(turn2Cont), nil); got == t1 {
		t.Error("without the prior chain the new turn alone matched turn 1")
	}
	s := ResponsesPrefix([]byte(turn1Str), nil)
	if s == 0 || s == t1 {
		t.Errorf("string input: %#x (array input %#x): want its own nonzero fingerprint", s, t1)
	}
}

// TestPrefixBroken: truncated or odd bodies never panic or loop.
func TestPrefixBroken(t *testing.T) {
	for _, body := range []string{chatTurn3, msgTurn2, `{"messages":[{"role":"user","content":[1,,]}]}`, `{"tools":]`, `[`, `"`} {
		for i := range len(body) + 1 {
			ChatPrefix([]byte(body[:i]))
			MessagesPrefix([]byte(body[:i]))
			ResponsesPrefix([]byte(body[:i]), nil)
		}
	}
	deep := `{"messages":[{"role":"user","content":` + nest(200) + `}]}`
	if ChatPrefix([]byte(deep)) == 0 {
		t.Error("a deeply nested first turn gave no fingerprint")
	}
}

func nest(n int) string {
	b := make([]byte, 0, 2*n+1)
	for range n {
		b = append(b, '[')
	}
	b = append(b, '1')
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

func FuzzChatPrefix(f *testing.F) {
	f.Add([]byte(chatTurn1))
	f.Add([]byte(msgTurn2))
	f.Fuzz(func(t *testing.T, body []byte) {
		ChatPrefix(body)
		MessagesPrefix(body)
		ResponsesPrefix(body, nil)
	})
}

func TestNoAllocs(t *testing.T) {
	body := []byte(chatTurn3)
	mbody := []byte(msgTurn2)
	s := mustSet(t, targets(30, func(i int) float64 { return float64(i%3 + 1) }), 0)
	buf := make([]int, 0, MaxTargets)
	if n := testing.AllocsPerRun(100, func() {
		id := Identify(Session, Fields{Prefix: ChatPrefix(body) ^ MessagesPrefix(mbody)})
		s.Order(id.Key, all(30), buf[:0])
	}); n != 0 {
		t.Errorf("fingerprint and placement: %v allocations, want 0", n)
	}
}

func BenchmarkChatPrefix(b *testing.B) {
	body := []byte(chatTurn3)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ChatPrefix(body)
	}
}

func BenchmarkIdentify(b *testing.B) {
	f := Fields{SessionID: "0b9e6d52-2f4a-4c3e-9d57-1f1a3c0e5b77"}
	b.ReportAllocs()
	for b.Loop() {
		Identify(Session, f)
	}
}
