package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/streamgate/streamgate/internal/sim"
)

// simTLSFlags are the sim command's TLS flags: a TLS upstream to measure
// and test the gateway's upstream hop as production runs it.
type simTLSFlags struct {
	on             bool
	cert, key, out string
	alpn           string
}

func bindSimTLSFlags(f *pflag.FlagSet) *simTLSFlags {
	var t simTLSFlags
	f.BoolVar(&t.on, "tls", false, "serve TLS (HTTP/2 and HTTP/1.1 by ALPN) instead of cleartext; a self-signed certificate for 127.0.0.1, ::1 and localhost unless --tls-cert")
	f.StringVar(&t.cert, "tls-cert", "", "PEM certificate (chain) to serve with --tls; needs --tls-key")
	f.StringVar(&t.key, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&t.out, "tls-ca-out", "", "write the self-signed certificate (PEM) here, for a provider's ca_file or bench --ca-file")
	f.StringVar(&t.alpn, "tls-alpn", "h2,http/1.1", "ALPN protocols offered, in order: h2,http/1.1 (providers' default) or http/1.1 (every client speaks HTTP/1.1 over TLS)")
	return &t
}

// config is the sim.TLS the flags ask for, nil without --tls.
func (t *simTLSFlags) config(fs *pflag.FlagSet) (*sim.TLS, error) {
	if !t.on {
		for _, name := range []string{"tls-cert", "tls-key", "tls-ca-out", "tls-alpn"} {
			if fs.Changed(name) {
				return nil, usagef("--%s needs --tls", name)
			}
		}
		return nil, nil
	}
	c := &sim.TLS{}
	for _, p := range strings.Split(t.alpn, ",") {
		p = strings.TrimSpace(p)
		if p != "h2" && p != "http/1.1" {
			return nil, usagef("--tls-alpn %q: want h2 and/or http/1.1, comma-separated", t.alpn)
		}
		c.ALPN = append(c.ALPN, p)
	}
	switch {
	case (t.cert == "") != (t.key == ""):
		return nil, usagef("--tls-cert and --tls-key go together")
	case t.cert != "":
		if t.out != "" {
			return nil, usagef("--tls-ca-out writes the self-signed certificate; with --tls-cert the client trusts that certificate's CA")
		}
		cert, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %v", err)
		}
		c.Certificate = cert
	default:
		cert, pem, err := sim.SelfSigned()
		if err != nil {
			return nil, fmt.Errorf("sim: make a certificate: %w", err)
		}
		c.Certificate = cert
		if t.out != "" {
			if err := os.WriteFile(t.out, pem, 0o644); err != nil {
				return nil, fmt.Errorf("sim: --tls-ca-out: %w", err)
			}
		}
	}
	return c, nil
}
