package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// maxForwardedHops bounds the X-Forwarded-For addresses read from the
// right: a header longer than that is walked no further.
const maxForwardedHops = 32

// trustedProxies are the config's trusted_proxies: from a peer among them
// the client's address is read from X-Forwarded-For.
type trustedProxies []netip.Prefix

func (t trustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client returns the address of r's client: its peer, or, when the peer
// is a trusted proxy, the right-most address of X-Forwarded-For that is
// not one (each trusted proxy appends the address it got the request
// from, so addresses left of the first untrusted one could be anything the
// client wrote). When every address is trusted, the left-most; an entry
// that is not an address ends the walk at the trusted hop to its right.
// ok is false when r's peer is not trusted or sent no X-Forwarded-For.
func (t trustedProxies) client(r *http.Request) (addr string, ok bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !t.trusts(peer) {
		return "", false
	}
	vals := r.Header.Values("X-Forwarded-For")
	if len(vals) == 0 {
		return "", false
	}
	last := peer.Unmap() // the right-most trusted hop so far
	hops := 0
	for i := len(vals) - 1; i >= 0; i-- {
		list := vals[i]
		for list != "" && hops < maxForwardedHops {
			var part string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				part, list = list[j+1:], list[:j]
			} else {
				part, list = list, ""
			}
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			hops++
			a, err := netip.ParseAddr(part)
			if err != nil {
				if ap, err2 := netip.ParseAddrPort(part); err2 == nil {
					a = ap.Addr()
				} else {
					return last.String(), true
				}
			}
			a = a.Unmap()
			if !t.trusts(a) {
				return a.String(), true
			}
			last = a
		}
	}
	return last.String(), true
}
