package redact

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"url", "see http://10.20.30.40:8443/v1 now", "see [address] now"},
		{"url any scheme", "dial tcp+tls://gpu:1/x failed", "dial [address] failed"},
		{"ipv6 url", "GET http://[fe80::1]:99/v1/chat: refused", "GET [address] refused"},
		{"bracketed ipv6 port", "connect [fe80::1]:99 refused", "connect [address] refused"},
		{"bracketed ipv6 zone", "at [fe80::1%eth0]", "at [address]"},
		{"bare ipv6", "from fe80::1 and 2001:db8::5.", "from [address] and [address]."},
		{"loopback ipv6", "dial ::1 refused", "dial [address] refused"},
		{"full ipv6", "x 2001:0db8:0000:0000:0000:ff00:0042:8329 y", "x [address] y"},
		{"mapped ipv6", "x ::ffff:10.0.0.1 y", "x [address] y"},
		{"ipv4", "upstream 10.1.2.3 down", "upstream [address] down"},
		{"ipv4 port", "(10.1.2.3:8443)", "([address])"},
		{"dotted host port", "gpu-node-3.internal:7000 is busy", "[address] is busy"},
		{"single label", "localhost:9000, vllm-svc:8000; vllm:80", "[address], [address]; [address]"},
		{"quoted", `"localhost:9000"`, `"[address]"`},
		{"sk", "key sk-abcdef123456 bad", "key [redacted] bad"},
		{"sk-ant", "bad key sk-ant-api03-AbC_d-ef0123456789", "bad key [redacted]"},
		{"sk-proj", "sk-proj-abcdEFGH1234", "[redacted]"},
		{"google", "key AIzaSyA-1234567890abcdefghijklmnop invalid", "key [redacted] invalid"},
		{"bearer", "header Authorization: Bearer abc.def-123_456 refused", "header Authorization: Bearer [redacted] refused"},
		{"field paths", "messages[0].content and tools[1].function.name: bad", "messages[0].content and tools[1].function.name: bad"},
		{"field path with index range", "messages[12].content[3].text", "messages[12].content[3].text"},
		{"time", "at 12:30:01 UTC", "at 12:30:01 UTC"},
		{"ratio", "a 3:1 ratio and 16:9", "a 3:1 ratio and 16:9"},
		{"words", "Error: max_tokens: 5 is not allowed", "Error: max_tokens: 5 is not allowed"},
		{"snake key", "invalid max_tokens:5", "invalid max_tokens:5"},
		{"cpp path", "std::vector", "std::vector"},
		{"version", "model v1.2 uses 2.5", "model v1.2 uses 2.5"},
		{"empty", "", ""},
		{"task", "task-abcdefgh stays", "task-abcdefgh stays"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q): got %q, want %q", tt.in, got, tt.want)
			}
			if got := Text(Text(tt.in)); got != tt.want {
				t.Errorf("Text twice (%q): got %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTextKeys(t *testing.T) {
	got := Text("no access for key my-vllm-secret-1", "my-vllm-secret-1", "short")
	if want := "no access for key [redacted]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := Text("a short key", "short"); got != "a short key" {
		t.Errorf("got %q: a key under 8 bytes must not be looked for", got)
	}
}

// address builds an address of kind k from the fuzzer's numbers and name.
func address(k uint8, a, b uint32, name string) string {
	label := hostLabel(name)
	port := 1 + b%65535
	v4 := fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&0xff, a>>8&0xff, a&0xff)
	var raw [16]byte
	for i := range 4 {
		raw[i] = byte(a >> (8 * i))
		raw[12+i] = byte(b >> (8 * i))
	}
	v6 := netip.AddrFrom16(raw).String()
	if netip.AddrFrom16(raw).Is4In6() {
		v6 = "2001:db8::" + fmt.Sprintf("%x", b&0xffff)
	}
	schemes := []string{"http", "https", "ws", "grpc+tls", "unix"}
	switch k % 9 {
	case 0:
		return fmt.Sprintf("%s://%s:%d/v1", schemes[b%uint32(len(schemes))], label, port)
	case 1:
		return fmt.Sprintf("%s:%d", label, port)
	case 2:
		return fmt.Sprintf("%s.internal:%d", label, port)
	case 3:
		return v4
	case 4:
		return fmt.Sprintf("%s:%d", v4, port)
	case 5:
		return v6
	case 6:
		return fmt.Sprintf("[%s]:%d", v6, port)
	case 7:
		return "sk-ant-api03-" + label + "0123456789"
	}
	return "AIzaSy" + label + "0123456789abcdefghijkl"
}

// hostLabel turns name into a host name label with a letter in it.
func hostLabel(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') && b.Len() < 40 {
			b.WriteRune(r)
		}
	}
	return "h" + b.String()
}

// FuzzText embeds an address or a secret in the fuzzer's text and checks
// that the output holds none of it, and that Text is idempotent.
func FuzzText(f *testing.F) {
	f.Add("see", "now", uint8(0), uint32(0x0a141e28), uint32(8443), "gpu")
	f.Add("messages[0].content", "12:30:01", uint8(6), uint32(0xfe800000), uint32(99), "vllm-svc")
	f.Add("Bearer", ":", uint8(1), uint32(1), uint32(9000), "localhost")
	f.Add("[", "]", uint8(5), uint32(0x20010db8), uint32(5), "x")
	f.Fuzz(func(t *testing.T, before, after string, k uint8, a, b uint32, name string) {
		addr := address(k, a, b, name)
		in := before + " " + addr + " " + after
		out := Text(in)
		if strings.Contains(out, addr) {
			t.Errorf("Text(%q) = %q: holds %q", in, out, addr)
		}
		if again := Text(out); again != out {
			t.Errorf("not idempotent: Text(%q) = %q, Text of that = %q", in, out, again)
		}
		if again := Text(Text(before)); again != Text(before) {
			t.Errorf("not idempotent on %q: %q then %q", before, Text(before), again)
		}
	})
}
