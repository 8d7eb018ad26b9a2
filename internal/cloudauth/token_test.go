package cloudauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tokenServer is a Google-like token endpoint: it checks the JWT-bearer
// grant's signature, audience and scope, and answers a token valid for
// expiresIn seconds.
func tokenServer(t *testing.T, pub *rsa.PublicKey, expiresIn int) (*httptest.Server, *atomic.Int32) {
	var grants atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		fail := func(msg string) {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, msg)
		}
		if r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			fail("grant_type")
			return
		}
		claims, err := VerifyJWT(r.Form.Get("assertion"), pub)
		if err != nil {
			fail(err.Error())
			return
		}
		if claims["aud"] != "http://"+r.Host+"/token" || claims["scope"] != GoogleScope || claims["iss"] != "sa@p.iam.gserviceaccount.com" {
			fail(fmt.Sprintf("claims %v", claims))
			return
		}
		n := grants.Add(1)
		fmt.Fprintf(w, `{"access_token":"ya29.token-%d","expires_in":%d,"token_type":"Bearer"}`, n, expiresIn)
	}))
	t.Cleanup(srv.Close)
	return srv, &grants
}

func writeServiceAccount(t *testing.T, key *rsa.PrivateKey, tokenURI string) string {
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "sa@p.iam.gserviceaccount.com", "private_key_id": "k1",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURI,
	})
	p := filepath.Join(t.TempDir(), "sa.json")
	os.WriteFile(p, sa, 0o600)
	return p
}

// TestServiceAccountOneGrant: 50 concurrent callers and 200 more later get
// their token from one JWT-bearer grant; a token near its expiry is
// replaced by a second grant.
func TestServiceAccountOneGrant(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	srv, grants := tokenServer(t, &key.PublicKey, 3600)
	ts, creds, err := GoogleTokenSource(writeServiceAccount(t, key, srv.URL+"/token"), GoogleScope, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if creds.ClientEmail != "sa@p.iam.gserviceaccount.com" {
		t.Errorf("client_email: got %q", creds.ClientEmail)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if tok, err := ts.Token(context.Background()); err != nil || tok != "ya29.token-1" {
				t.Errorf("got %q, %v; want ya29.token-1", tok, err)
			}
		})
	}
	wg.Wait()
	for range 200 {
		ts.Token(context.Background())
	}
	if n := grants.Load(); n != 1 {
		t.Errorf("got %d grants for 250 tokens, want 1", n)
	}
	// 56 minutes later the token is within 5 minutes of its expiry.
	ts.now = func() time.Time { return time.Now().Add(56 * time.Minute) }
	if tok, _ := ts.Token(context.Background()); tok != "ya29.token-2" {
		t.Errorf("near expiry: got %q, want a new token", tok)
	}
}

// TestShortLivedToken: a token that lives 60 s is renewed at half its life,
// and one grant serves the calls before that.
func TestShortLivedToken(t *testing.T) {
	var grants atomic.Int32
	clock := time.Now()
	ts := NewTokenSource(func(context.Context) (string, time.Time, error) {
		n := grants.Add(1)
		return fmt.Sprint("t", n), clock.Add(60 * time.Second), nil
	})
	ts.now = func() time.Time { return clock }
	for range 10 {
		if tok, _ := ts.Token(context.Background()); tok != "t1" {
			t.Fatalf("got %q, want t1", tok)
		}
	}
	clock = clock.Add(31 * time.Second)
	if tok, _ := ts.Token(context.Background()); tok != "t2" || grants.Load() != 2 {
		t.Errorf("past half its life: got %q after %d grants, want t2 after 2", tok, grants.Load())
	}
}

// TestGrantRefused: a key the endpoint does not know gives an error that
// names the endpoint's reason, and the next call tries again.
func TestGrantRefused(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	srv, _ := tokenServer(t, &key.PublicKey, 3600)
	ts, _, err := GoogleTokenSource(writeServiceAccount(t, other, srv.URL+"/token"), GoogleScope, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := ts.Token(context.Background())
		if err == nil || !strings.Contains(err.Error(), "invalid signature") {
			t.Errorf("got %v, want the endpoint's reason", err)
		}
	}
	if ts.Grants() != 2 {
		t.Errorf("got %d grants, want 2 (a failed grant is not cached)", ts.Grants())
	}
}

func TestGoogleCredentialsErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"type":"external_account"}`), 0o600)
	if _, _, err := GoogleTokenSource(bad, GoogleScope, nil); err == nil || !strings.Contains(err.Error(), "external_account") {
		t.Errorf("unsupported type: got %v", err)
	}
	if _, _, err := GoogleTokenSource(filepath.Join(dir, "none.json"), GoogleScope, nil); err == nil {
		t.Errorf("missing file: no error")
	}
	env := map[string]string{"HOME": dir}
	if _, err := FindGoogleCredentials(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "application_default_credentials.json") {
		t.Errorf("no ADC: got %v", err)
	}
	env["GOOGLE_APPLICATION_CREDENTIALS"] = bad
	if p, err := FindGoogleCredentials(func(k string) string { return env[k] }); p != bad || err != nil {
		t.Errorf("GOOGLE_APPLICATION_CREDENTIALS: got %q, %v", p, err)
	}
}
