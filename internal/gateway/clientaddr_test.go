package gateway

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestTrustedProxiesClient(t *testing.T) {
	tp := trustedProxies{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
		ok         bool
	}{
		{"untrusted peer: header ignored", "203.0.113.9:4000", []string{"198.51.100.1"}, "", false},
		{"trusted peer, no header", "10.1.1.1:4000", nil, "", false},
		{"one hop", "10.1.1.1:4000", []string{"198.51.100.1"}, "198.51.100.1", true},
		{"spoofed left entries skipped", "10.1.1.1:4000", []string{"1.2.3.4, 198.51.100.1"}, "198.51.100.1", true},
		{"trusted hops walked", "10.1.1.1:4000", []string{"198.51.100.1, 10.2.2.2", "10.3.3.3"}, "198.51.100.1", true},
		{"all trusted: left-most", "10.1.1.1:4000", []string{"10.9.9.9, 10.2.2.2"}, "10.9.9.9", true},
		{"garbage ends the walk", "10.1.1.1:4000", []string{"1.2.3.4, bogus, 10.2.2.2"}, "10.2.2.2", true},
		{"ipv6 and a port", "[fd00::1]:4000", []string{"[2001:db8::7]:555"}, "2001:db8::7", true},
		{"ipv4-mapped peer", "[::ffff:10.1.1.1]:4000", []string{"198.51.100.2"}, "198.51.100.2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, ok := tp.client(r)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
