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
