package sim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// TLS serves the simulator over TLS, as a provider's public endpoint is
// served, so that the gateway's upstream hop can be measured with the
// handshake, record encryption and ALPN it costs in production.
type TLS struct {
	// Certificate is the server's; SelfSigned makes one.
	Certificate tls.Certificate
	// ALPN is the protocols offered, in order of preference; nil offers
	// h2 and http/1.1, as providers do. []string{"http/1.1"} makes every
	// client speak HTTP/1.1 over TLS.
	ALPN []string
}

// config is the server's tls.Config: TLS 1.2 at least, the ALPN set, and
// a count of the handshakes done (streamgate_sim_tls_handshakes_total).
func (t *TLS) config(m *metrics) (*tls.Config, error) {
	alpn := t.ALPN
	if alpn == nil {
		alpn = []string{"h2", "http/1.1"}
	}
	for _, p := range alpn {
		if p != "h2" && p != "http/1.1" {
			return nil, fmt.Errorf("sim: ALPN protocol %q: want h2 or http/1.1", p)
		}
	}
	return &tls.Config{
		Certificates: []tls.Certificate{t.Certificate},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   alpn,
		VerifyConnection: func(cs tls.ConnectionState) error {
			resumed := "false"
			if cs.DidResume {
				resumed = "true"
			}
			m.handshakes.WithLabelValues(resumed).Inc()
			return nil
		},
	}, nil
}

// SelfSigned returns a self-signed certificate for 127.0.0.1, ::1,
// localhost and hosts, valid for a day, and its PEM: the CA a client
// trusts (a provider's ca_file, bench --ca-file) to reach the simulator.
func SelfSigned(hosts ...string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "streamgate sim"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, certPEM, err
}
