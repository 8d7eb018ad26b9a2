package responses

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestItems: the input as a stored response keeps it, item references
// resolved.
func TestItems(t *testing.T) {
	stored := json.RawMessage(`{"id":"msg_old","type":"message","role":"assistant","content":[{"type":"output_text","text":"before"}]}`)
	resolve := func(id string) (json.RawMessage, error) {
		if id == "msg_old" {
			return stored, nil
		}
		return nil, errors.New("no " + id)
	}
	items, err := Items(json.RawMessage(`"hi"`), resolve)
	if err != nil || len(items) != 1 || !strings.Contains(string(items[0]), `"content":[{"type":"input_text","text":"hi"}]`) ||
		!strings.Contains(string(items[0]), `"id":"msg_`) || !strings.Contains(string(items[0]), `"role":"user"`) {
		t.Fatalf("string input: got %s, %v; want one user message with an id and an input_text part", items, err)
	}
	in := `[{"role":"assistant","content":"ok"},{"type":"function_call_output","call_id":"c1","output":"x","id":"fco_mine"},{"id":"msg_old"},{"type":"item_reference","id":"msg_old"}]`
	items, err = Items(json.RawMessage(in), resolve)
	if err != nil || len(items) != 4 {
		t.Fatalf("items: got %s, %v", items, err)
	}
	for i, want := range []string{`"content":[{"type":"output_text","text":"ok"}]`, `"id":"fco_mine"`, `"text":"before"`, `"text":"before"`} {
		if !strings.Contains(string(items[i]), want) {
			t.Errorf("item %d: got %s, want it to hold %s", i, items[i], want)
		}
	}
	if !strings.Contains(string(items[0]), `"type":"message"`) {
		t.Errorf("a message without type: got %s, want type message", items[0])
	}
	if _, err := Items(json.RawMessage(`[{"id":"msg_gone"}]`), resolve); err == nil || err.Error() != "no msg_gone" {
		t.Errorf("unresolved reference: got %v, want the resolver's error", err)
	}
	var re *Error
	if _, err := Items(json.RawMessage(`[{"id":"msg_old"}]`), nil); !errors.As(err, &re) || re.Param != "input[0].type" || !strings.Contains(re.Msg, "item_reference") {
		t.Errorf("no resolver: got %v, want an error naming item_reference", err)
	}
	if !HasReference(json.RawMessage(in)) || HasReference(json.RawMessage(`[{"role":"user","content":"x"}]`)) || HasReference(json.RawMessage(`"x"`)) {
		t.Error("HasReference: wrong answer")
	}
}

// TestParsePrior: previous_response_id's items come before the input
// (after the instructions), and the response echoes it and store; without
// them previous_response_id is refused.
func TestParsePrior(t *testing.T) {
	prev := "resp_1"
	r := Request{Model: "m", PreviousResponseID: &prev, Input: json.RawMessage(`"again"`), Instructions: strPtr("sys")}
	if _, err := r.Parse(); err == nil || !strings.Contains(err.Error(), "previous_response_id") {
		t.Fatalf("unresolved previous_response_id: got %v, want it refused", err)
	}
	r.Prior = []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"user","content":"first"}`),
		json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer"}]}`),
	}
	r.Keep = true
	p, err := r.Parse()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range p.Chat.Messages {
		var s string
		json.Unmarshal(m.Content, &s)
		got = append(got, m.Role+":"+s)
	}
	if strings.Join(got, "|") != "system:sys|user:first|assistant:answer|user:again" {
		t.Errorf("messages: got %v", got)
	}
	resp := string(p.Meta.appendResponse(nil, nil, &final{status: "completed"}, nil))
	if !strings.Contains(resp, `"previous_response_id":"resp_1"`) || !strings.Contains(resp, `"store":true`) {
		t.Errorf("response: got %s; want previous_response_id and store true echoed", resp)
	}
}

func strPtr(s string) *string { return &s }

// FuzzItems: Items never fails on an input the translation takes, and the
// items it keeps translate to the same chat messages as the input itself.
func FuzzItems(f *testing.F) {
	for _, s := range []string{`"hi"`, `[{"role":"user","content":"x"}]`, `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]`,
		`[{"type":"function_call_output","call_id":"c","output":"o"}]`, `[{"id":"x"}]`, `[1]`, `{}`, `null`, `[{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}]}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		want, skipped, werr := convertInput(nil, raw)
		if skipped != nil {
			return // items only a route passing Responses through serves (item_reference without a store)
		}
		items, err := Items(raw, nil)
		if err != nil {
			if werr == nil && isSet(raw) {
				t.Fatalf("Items refused %s (%v), which translates", raw, err)
			}
			return
		}
		for _, it := range items {
			if !json.Valid(it) || itemIDOf(it) == "" {
				t.Fatalf("item %s: not JSON or no id", it)
			}
		}
		norm, _ := json.Marshal(items)
		got, _, gerr := convertInput(nil, norm)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: translation error %v, of its items %v", raw, werr, gerr)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if werr == nil && string(a) != string(b) {
			t.Fatalf("%s: messages %s, of its items %s", raw, a, b)
		}
	})
}

func itemIDOf(it json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(it, &v)
	return v.ID
}
