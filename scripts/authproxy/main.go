// Command authproxy stands in front of the gateway for clients that cannot
// send a credential, such as the MCP conformance suite: it adds
// "Authorization: Bearer $KEY" to every request and passes the rest
// through, streams flushed at once. scripts/mcp-conformance.sh uses it.
//
// It is a measuring tool, not part of streamgate.
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "the gateway's base URL, e.g. http://127.0.0.1:8080")
	flag.Parse()
	key := os.Getenv("KEY")
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" || key == "" {
		log.Fatal("authproxy: --upstream URL and the KEY environment variable are required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("authproxy: %v", err)
	}
	log.Printf("authproxy: listening on %s", ln.Addr())
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // the gateway's DNS-rebinding check sees what the client sent
			r.Out.Header.Set("Authorization", "Bearer "+key)
		},
		FlushInterval: -1,
	}
	log.Fatal(http.Serve(ln, p))
}
