package cloudauth

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var testCreds = AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}

func bedrockRequest(t testing.TB, model string, body []byte) *http.Request {
	t.Helper()
	u := "https://bedrock-runtime.us-east-1.amazonaws.com/model/" + PathEscape(model) + "/invoke-with-response-stream"
	req, err := http.NewRequest("POST", u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/vnd.amazon.eventstream")
	return req
}

// TestSigV4MatchesAWSSDK signs the same Bedrock requests with this signer
// and the AWS SDK's: the same Authorization header, for model ids with ':'
// and ARNs with '/', with and without a session token, with a query.
func TestSigV4MatchesAWSSDK(t *testing.T) {
	now := time.Date(2026, 12, 6, 20, 31, 5, 0, time.UTC)
	body := []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	models := []string{
		"anthropic.claude-sonnet-4-5-20250929-v1:0",
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/global.anthropic.claude-opus-4-5-v1:0",
		"amazon.nova-pro-v1:0",
	}
	for _, token := range []string{"", "FQoGZXIvYXdzEXAMPLE//token+="} {
		for _, model := range models {
			creds := testCreds
			creds.SessionToken = token
			ours := bedrockRequest(t, model, body)
			ref := bedrockRequest(t, model, body)
			if strings.Contains(model, "nova") {
				ours.URL.RawQuery, ref.URL.RawQuery = "b=2&a=x y&a=1", "b=2&a=x y&a=1"
			}
			s := &SigV4{Service: "bedrock", Region: "us-east-1", Creds: creds}
			if err := s.Sign(ours, PayloadHash(body), now); err != nil {
				t.Fatal(err)
			}
			// The SDK signs Accept too (it signs every header but a few);
			// sign the same set: drop Accept from its request and put it back.
			ref.Header.Del("Accept")
			err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{
				AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken,
			}, ref, PayloadHash(body), "bedrock", "us-east-1", now)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ours.Header.Get("Authorization"), ref.Header.Get("Authorization"); got != want {
				t.Errorf("%s (token %v):\n got %s\nwant %s", model, token != "", got, want)
			}
			if got, want := ours.Header.Get("X-Amz-Security-Token"), ref.Header.Get("X-Amz-Security-Token"); got != want {
				t.Errorf("session token header: got %q, want %q", got, want)
			}
			if !strings.Contains(ours.URL.EscapedPath(), PathEscape(model)) {
				t.Errorf("path %q does not carry the escaped model id", ours.URL.EscapedPath())
			}
		}
	}
}

// TestVerifySigV4: a signed request verifies; a wrong secret, a changed
// body, a changed path, an unsigned x-amz header, a stale date and another
// service are each refused with AWS's reason.
func TestVerifySigV4(t *testing.T) {
	now := time.Date(2026, 12, 6, 20, 31, 5, 0, time.UTC)
	body := []byte(`{"messages":[]}`)
	lookup := func(id string) (AWSCredentials, bool) { return testCreds, id == testCreds.AccessKeyID }
	sign := func(creds AWSCredentials, at time.Time) *http.Request {
		req := bedrockRequest(t, "anthropic.claude-3-haiku-20240307-v1:0", body)
		s := &SigV4{Service: "bedrock", Region: "us-east-1", Creds: creds}
		if err := s.Sign(req, PayloadHash(body), at); err != nil {
			t.Fatal(err)
		}
		return req
	}
	if err := VerifySigV4(sign(testCreds, now), "bedrock", PayloadHash(body), now, lookup); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	wrong := testCreds
	wrong.SecretAccessKey = "not-the-secret"
	unknown := testCreds
	unknown.AccessKeyID = "AKIDOTHER"
	extra := sign(testCreds, now)
	extra.Header.Set("X-Amz-Target", "x")
	moved := sign(testCreds, now)
	moved.URL.Path, moved.URL.RawPath = "/model/other/invoke", ""
	cases := []struct {
		name string
		req  *http.Request
		hash string
		want string
	}{
		{"wrong secret", sign(wrong, now), PayloadHash(body), "does not match"},
		{"unknown key", sign(unknown, now), PayloadHash(body), "security token"},
		{"changed body", sign(testCreds, now), PayloadHash([]byte("{}")), "does not match"},
		{"changed path", moved, PayloadHash(body), "does not match"},
		{"unsigned x-amz header", extra, PayloadHash(body), "not signed"},
		{"stale", sign(testCreds, now.Add(-6*time.Minute)), PayloadHash(body), "expired"},
	}
	for _, c := range cases {
		err := VerifySigV4(c.req, "bedrock", c.hash, now, lookup)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if err := VerifySigV4(sign(testCreds, now), "s3", PayloadHash(body), now, lookup); err == nil {
		t.Errorf("another service's scope: verified, want refused")
	}
}

func BenchmarkSign(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 20000)
	req := bedrockRequest(b, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", body)
	s := &SigV4{Service: "bedrock", Region: "us-east-1", Creds: testCreds}
	hash := PayloadHash(body)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Sign(req, hash, now); err != nil {
			b.Fatal(err)
		}
	}
}
