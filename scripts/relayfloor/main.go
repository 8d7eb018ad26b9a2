// Command relayfloor is the smallest relay that can stand where the gateway
// stands, to measure what this machine charges for relaying a stream at all.
// scripts/gateway-overhead.sh runs it in place of the gateway (FLOOR=tcp or
// FLOOR=http), so the gateway's figures can be read against a floor taken
// with the same load, on the same machine, in the same way:
//
//   - tcp: a byte copy between two TCP connections, one goroutine per
//     direction and one read and one write per chunk; no HTTP at all.
//   - http: net/http's own reverse proxy (httputil.ReverseProxy), which
//     flushes text/event-stream responses at once; no auth, no parsing,
//     no metrics. With -upstream-ca it reaches the upstream over TLS, as
//     the gateway does a provider's https:// base URL.
//
// It is a measuring tool, not part of streamgate.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	_ "net/http/pprof"
	"net/url"
	"os"
	"sync"
)

func main() {
	mode := flag.String("mode", "tcp", "tcp (byte copy) or http (httputil.ReverseProxy)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "upstream HOST:PORT")
	caFile := flag.String("upstream-ca", "", "http mode: reach the upstream over TLS (https://), verified against this PEM CA file (sim --tls-ca-out); HTTP/2 or HTTP/1.1 as the upstream's ALPN offers")
	pprofAddr := flag.String("pprof", "", "serve /debug/pprof/ on this HOST:PORT (default: off), to profile the floor as the gateway is profiled")
	flag.Parse()
	if *pprofAddr != "" {
		go func() { log.Print(http.ListenAndServe(*pprofAddr, nil)) }() // net/http/pprof registers on the default mux
	}
	if *upstream == "" {
		log.Fatal("relayfloor: --upstream HOST:PORT is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("relayfloor: %v", err)
	}
	switch *mode {
	case "tcp":
		serveTCP(ln, *upstream)
	case "http":
		u := &url.URL{Scheme: "http", Host: *upstream}
		tr := &http.Transport{MaxIdleConnsPerHost: 1 << 16}
		if *caFile != "" {
			pem, err := os.ReadFile(*caFile)
			if err != nil {
				log.Fatalf("relayfloor: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				log.Fatalf("relayfloor: %s holds no PEM certificate", *caFile)
			}
			u.Scheme = "https"
			tr.TLSClientConfig = &tls.Config{RootCAs: pool}
			tr.ForceAttemptHTTP2 = true // as the gateway's transport: h2 when ALPN offers it
		}
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.Transport = tr
		log.Fatal(http.Serve(ln, rp))
	default:
		log.Fatalf("relayfloor: unknown --mode %q (want tcp or http)", *mode)
	}
}

// bufs holds the copy buffers: a relayed chunk is a few hundred bytes, and a
// small buffer keeps the floor's memory per stream honest.
var bufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

func serveTCP(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatalf("relayfloor: %v", err)
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				log.Printf("relayfloor: %v", err)
				return
			}
			defer u.Close()
			go pipe(u, c)
			pipe(c, u)
		}()
	}
}

// pipe copies src to dst until either side ends, then closes both so the
// other direction ends too.
func pipe(dst, src net.Conn) {
	b := bufs.Get().(*[]byte)
	defer bufs.Put(b)
	for {
		n, err := src.Read(*b)
		if n > 0 {
			if _, werr := dst.Write((*b)[:n]); werr != nil {
				break
			}
		}
		if err != nil { // io.EOF or a cut: this direction is over
			break
		}
	}
	dst.Close()
	src.Close()
}
