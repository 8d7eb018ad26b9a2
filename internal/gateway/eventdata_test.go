package gateway

import "testing"

func TestEventData(t *testing.T) {
	var join []byte
	for _, c := range []struct {
		block, data   string
		ok, keepAlive bool
	}{
		{"event: response.created\ndata: {\"a\":1}", `{"a":1}`, true, false},
		{"data:{\"a\":1}", `{"a":1}`, true, false},
		{"data: a\ndata: b\ndata: c", "a\nb\nc", true, false},
		{"id: 7\nevent: x", "", false, false},
		{": keep-alive", "", false, true},
		{": keep-alive\ndata: x", "x", true, true},
		{": other comment", "", false, false},
		{"data: [DONE]", "[DONE]", false, false},
	} {
		data, ok, ka := eventData([]byte(c.block), &join)
		if string(data) != c.data || ok != c.ok || ka != c.keepAlive {
			t.Errorf("eventData(%q) = %q, %v, %v; want %q, %v, %v", c.block, data, ok, ka, c.data, c.ok, c.keepAlive)
		}
	}
}

// TestSSEBlocks: the blocks of a stream are the same however its bytes
// are cut into writes, and a block is passed once it is whole.
func TestSSEBlocks(t *testing.T) {
	stream := "data: a\n\n: keep-alive\n\nevent: x\ndata: b\ndata: c\n\ndata: [DONE]\n\n"
	want := []string{"data: a", ": keep-alive", "event: x\ndata: b\ndata: c", "data: [DONE]"}
	for cut := 1; cut <= len(stream); cut++ {
		var b sseBlocks
		var got []string
		for i := 0; i < len(stream); i += cut {
			if err := b.feed([]byte(stream[i:min(i+cut, len(stream))]), func(block []byte) error {
				got = append(got, string(block))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("writes of %d bytes: got blocks %q, want %q", cut, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("writes of %d bytes: got blocks %q, want %q", cut, got, want)
			}
		}
	}
}
