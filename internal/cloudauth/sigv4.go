// Package cloudauth holds the credentials a cloud provider kind adds to an
// upstream request, apart from the dialect the request speaks: AWS
// Signature Version 4 (Bedrock), OAuth2 access tokens minted from a Google
// service account or application-default credentials and cached until near
// their expiry (Vertex AI), and Microsoft Entra ID client-credential tokens
// (Azure). The provider adapters build the request in their dialect; this
// package only signs it or sets its bearer token.
package cloudauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AWSCredentials are an AWS access key, its secret and, for temporary
// credentials, the session token.
type AWSCredentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// EmptyPayloadHash is the SHA-256 of an empty body, hex-encoded.
const EmptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// PayloadHash returns the hex SHA-256 of body, as SigV4 signs it.
func PayloadHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// SigV4 signs requests with AWS Signature Version 4 for one service in one
// region. The derived signing key is cached per day, so a request costs
// two HMACs and a hash beyond building the canonical request. It is safe
// for concurrent use.
type SigV4 struct {
	Service string // e.g. "bedrock"
	Region  string // e.g. "us-east-1"
	Creds   AWSCredentials

	mu      sync.Mutex
	keyDate string // yyyymmdd the cached key is for
	keyID   string // the access key it was derived for
	key     []byte
}

// ErrNoCredentials reports a signer without an access key or secret.
var ErrNoCredentials = errors.New("aws credentials: access key id and secret access key are required")

// Sign adds X-Amz-Date, X-Amz-Security-Token (with a session token) and
// Authorization to req for a body whose hex SHA-256 is payloadHash (use
// PayloadHash, or EmptyPayloadHash for none), at time now. The signed
// headers are host, content-length (when known), content-type and every
// X-Amz-* header present, which is what AWS requires and what the AWS
// SDKs sign for such a request.
func (s *SigV4) Sign(req *http.Request, payloadHash string, now time.Time) error {
	if s.Creds.AccessKeyID == "" || s.Creds.SecretAccessKey == "" {
		return ErrNoCredentials
	}
	now = now.UTC()
	amzDate := now.Format("20060102T150405Z")
	date := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)
	if s.Creds.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", s.Creds.SessionToken)
	} else {
		req.Header.Del("X-Amz-Security-Token")
	}
	req.Header.Del("Authorization")

	names := make([]string, 0, 8)
	names = append(names, "host")
	if req.ContentLength > 0 {
		names = append(names, "content-length")
	}
	for k := range req.Header {
		lk := strings.ToLower(k)
		if lk == "content-type" || strings.HasPrefix(lk, "x-amz-") {
			names = append(names, lk)
		}
	}
	slices.Sort(names)
	signedHeaders := strings.Join(names, ";")
	scope := date + "/" + s.Region + "/" + s.Service + "/aws4_request"
	sig := s.signature(req, names, signedHeaders, payloadHash, amzDate, scope)
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s.Creds.AccessKeyID+"/"+scope+
		", SignedHeaders="+signedHeaders+", Signature="+sig)
	return nil
}

// signature computes the hex signature of req over the named headers
// (lower-case, sorted).
func (s *SigV4) signature(req *http.Request, names []string, signedHeaders, payloadHash, amzDate, scope string) string {
	var b strings.Builder
	b.Grow(512)
	b.WriteString(req.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(req.URL))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(req.URL))
	b.WriteByte('\n')
	for _, k := range names {
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(headerValue(req, k))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(signedHeaders)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	canonical := sha256.Sum256([]byte(b.String()))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(canonical[:])
	return hex.EncodeToString(hmacSHA256(s.signingKey(amzDate[:8]), []byte(toSign)))
}

// headerValue is the canonical value of the header named k (lower-case):
// its values trimmed, inner runs of spaces folded, joined by commas.
func headerValue(req *http.Request, k string) string {
	switch k {
	case "host":
		if req.Host != "" {
			return req.Host
		}
		return req.URL.Host
	case "content-length":
		if req.ContentLength > 0 {
			return strconv.FormatInt(req.ContentLength, 10)
		}
	}
	vs := req.Header.Values(k)
	vals := make([]string, len(vs))
	for i, v := range vs {
		vals[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(vals, ",")
}

// signingKey derives (or returns the cached) key for date.
func (s *SigV4) signingKey(date string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyDate == date && s.keyID == s.Creds.AccessKeyID && s.key != nil {
		return s.key
	}
	k := hmacSHA256([]byte("AWS4"+s.Creds.SecretAccessKey), []byte(date))
	k = hmacSHA256(k, []byte(s.Region))
	k = hmacSHA256(k, []byte(s.Service))
	k = hmacSHA256(k, []byte("aws4_request"))
	s.keyDate, s.keyID, s.key = date, s.Creds.AccessKeyID, k
	return k
}

func hmacSHA256(key, data []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(data)
	return m.Sum(nil)
}

// canonicalURI is the request's escaped path escaped once more, as SigV4
// asks of every service but S3: a model id "a:b" sent as "a%3Ab" is signed
// as "a%253Ab".
func canonicalURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		return "/"
	}
	return awsEscape(p, false)
}

// canonicalQuery sorts the query's parameters by name, then value, each
// escaped the AWS way.
func canonicalQuery(u *url.URL) string {
	if u.RawQuery == "" {
		return ""
	}
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		vs := slices.Clone(q[k])
		slices.Sort(vs)
		for _, v := range vs {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(awsEscape(k, true))
			b.WriteByte('=')
			b.WriteString(awsEscape(v, true))
		}
	}
	return b.String()
}

// awsEscape percent-encodes every byte but the unreserved ones
// (A–Z a–z 0–9 - _ . ~) and, unless slash, '/'.
func awsEscape(s string, slash bool) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !slash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexd[c>>4])
		b.WriteByte(hexd[c&15])
	}
	return b.String()
}

// PathEscape escapes one path segment for an AWS URL: a Bedrock model id,
// inference profile or ARN ("arn:aws:bedrock:…:inference-profile/x")
// becomes one segment, ':' and '/' escaped.
func PathEscape(segment string) string { return awsEscape(segment, true) }

// A SigV4Error says why VerifySigV4 refused a request, in the words AWS
// uses for it; the sim answers it 403 as AWS does.
type SigV4Error struct{ Message string }

func (e *SigV4Error) Error() string { return e.Message }

// VerifySigV4 checks req's SigV4 Authorization against the secret that
// lookup returns for its access key id, for the service and a body whose
// hex SHA-256 is payloadHash, and that its X-Amz-Date is within 5 minutes
// of now, as AWS does. It is the simulator's half of Sign.
func VerifySigV4(req *http.Request, service, payloadHash string, now time.Time, lookup func(accessKeyID string) (AWSCredentials, bool)) error {
	auth := req.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return &SigV4Error{"Authorization header requires the AWS4-HMAC-SHA256 algorithm"}
	}
	var cred, signedHeaders, sig string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signedHeaders = v
		case "Signature":
			sig = v
		}
	}
	id, scope, _ := strings.Cut(cred, "/")
	sp := strings.Split(scope, "/")
	if id == "" || len(sp) != 4 || sp[3] != "aws4_request" || signedHeaders == "" || sig == "" {
		return &SigV4Error{"Authorization header requires Credential, SignedHeaders and Signature"}
	}
	if sp[2] != service {
		return &SigV4Error{"Credential should be scoped to correct service: '" + service + "'"}
	}
	creds, ok := lookup(id)
	if !ok {
		return &SigV4Error{"The security token included in the request is invalid."}
	}
	amzDate := req.Header.Get("X-Amz-Date")
	t, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || amzDate[:8] != sp[0] {
		return &SigV4Error{"X-Amz-Date is missing, malformed or not the credential's date"}
	}
	if d := now.Sub(t); d > 5*time.Minute || d < -5*time.Minute {
		return &SigV4Error{"Signature expired: " + amzDate + " is not within 5 minutes of the server's time"}
	}
	names := strings.Split(signedHeaders, ";")
	if !slices.IsSorted(names) || !slices.Contains(names, "host") {
		return &SigV4Error{"SignedHeaders must be sorted and include host"}
	}
	for k := range req.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") && !slices.Contains(names, lk) {
			return &SigV4Error{"Header " + lk + " is present but not signed"}
		}
	}
	s := &SigV4{Service: sp[2], Region: sp[1], Creds: creds}
	want := s.signature(req, names, signedHeaders, payloadHash, amzDate, scope)
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return &SigV4Error{"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."}
	}
	return nil
}
