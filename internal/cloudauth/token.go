package cloudauth

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// refreshBefore is how long before its expiry a cached token is replaced:
// a request never leaves with a token about to lapse on the wire.
const refreshBefore = 5 * time.Minute

// A TokenSource hands out a bearer token, minting one only when the cached
// one is missing or within refreshBefore of its expiry. Concurrent callers
// share one grant in flight: many requests, one grant. It is safe for
// concurrent use.
type TokenSource struct {
	mint func(ctx context.Context) (token string, expiry time.Time, err error)
	now  func() time.Time

	mu        sync.Mutex
	token     string
	refreshAt time.Time     // expiry less refreshBefore, or half the lifetime when shorter
	flight    chan struct{} // closed when the grant in flight ends
	err       error         // the last grant's error, for those who waited on it
	grants    int
}

// NewTokenSource returns a TokenSource over mint.
func NewTokenSource(mint func(ctx context.Context) (string, time.Time, error)) *TokenSource {
	return &TokenSource{mint: mint, now: time.Now}
}

// Grants reports how many grants the source has made.
func (s *TokenSource) Grants() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants
}

// Token returns a valid token, minting one if needed.
func (s *TokenSource) Token(ctx context.Context) (string, error) {
	for {
		s.mu.Lock()
		if s.token != "" && s.now().Before(s.refreshAt) {
			t := s.token
			s.mu.Unlock()
			return t, nil
		}
		if s.flight != nil {
			ch := s.flight
			s.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			if err != nil {
				return "", err
			}
			continue
		}
		ch := make(chan struct{})
		s.flight = ch
		s.grants++
		s.mu.Unlock()

		// The grant outlives a caller that gives up: others wait on it.
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		start := s.now()
		tok, exp, err := s.mint(gctx)
		cancel()
		s.mu.Lock()
		s.flight, s.err = nil, err
		if err == nil {
			// A token that lives less than 10 minutes is renewed at half its
			// life, not never (or at every call).
			s.token, s.refreshAt = tok, exp.Add(-min(refreshBefore, exp.Sub(start)/2))
		}
		s.mu.Unlock()
		close(ch)
		return tok, err
	}
}

// GoogleCredentials is a Google credentials JSON file: a service account's
// key (type service_account) or a user's application-default credentials
// (type authorized_user, as `gcloud auth application-default login`
// writes them).
type GoogleCredentials struct {
	Type         string `json:"type"`
	ClientEmail  string `json:"client_email"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	TokenURI     string `json:"token_uri"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RefreshToken string `json:"refresh_token"`
}

// GoogleScope is the OAuth2 scope Vertex AI requests need.
const GoogleScope = "https://www.googleapis.com/auth/cloud-platform"

const googleTokenURI = "https://oauth2.googleapis.com/token"

// FindGoogleCredentials returns the path of the credentials file to use
// when the config names none: $GOOGLE_APPLICATION_CREDENTIALS, else gcloud's
// application-default file, as Google's client libraries look them up.
func FindGoogleCredentials(getenv func(string) string) (string, error) {
	if p := getenv("GOOGLE_APPLICATION_CREDENTIALS"); p != "" {
		return p, nil
	}
	dir := getenv("CLOUDSDK_CONFIG")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("google credentials: no credentials_file, GOOGLE_APPLICATION_CREDENTIALS unset and no home directory for gcloud's application-default credentials")
		}
		dir = filepath.Join(home, ".config", "gcloud")
	}
	p := filepath.Join(dir, "application_default_credentials.json")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("google credentials: no credentials_file, GOOGLE_APPLICATION_CREDENTIALS unset and %s not found (run `gcloud auth application-default login` or name a service-account key)", p)
	}
	return p, nil
}

// GoogleTokenSource reads a credentials file and returns a TokenSource
// for scope: a service account signs a JWT-bearer grant (RS256) to its
// token_uri; authorized-user credentials use their refresh token. client
// makes the grant requests (nil: http.DefaultClient).
func GoogleTokenSource(path, scope string, client *http.Client) (*TokenSource, *GoogleCredentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("google credentials: %w", err)
	}
	var c GoogleCredentials
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, nil, fmt.Errorf("google credentials %s: not a credentials JSON file: %w", path, err)
	}
	if client == nil {
		client = http.DefaultClient
	}
	if c.TokenURI == "" {
		c.TokenURI = googleTokenURI
	}
	switch c.Type {
	case "service_account":
		key, err := parseRSAKey(c.PrivateKey)
		if err != nil {
			return nil, nil, fmt.Errorf("google credentials %s: private_key: %w", path, err)
		}
		if c.ClientEmail == "" {
			return nil, nil, fmt.Errorf("google credentials %s: client_email is missing", path)
		}
		return NewTokenSource(func(ctx context.Context) (string, time.Time, error) {
			now := time.Now()
			assertion, err := SignJWT(key, c.PrivateKeyID, map[string]any{
				"iss": c.ClientEmail, "scope": scope, "aud": c.TokenURI,
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
			})
			if err != nil {
				return "", time.Time{}, err
			}
			return grant(ctx, client, c.TokenURI, url.Values{
				"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
				"assertion":  {assertion},
			})
		}), &c, nil
	case "authorized_user":
		if c.RefreshToken == "" || c.ClientID == "" {
			return nil, nil, fmt.Errorf("google credentials %s: refresh_token and client_id are required", path)
		}
		return NewTokenSource(func(ctx context.Context) (string, time.Time, error) {
			return grant(ctx, client, c.TokenURI, url.Values{
				"grant_type": {"refresh_token"}, "refresh_token": {c.RefreshToken},
				"client_id": {c.ClientID}, "client_secret": {c.ClientSecret},
			})
		}), &c, nil
	default:
		return nil, nil, fmt.Errorf("google credentials %s: type %q is not supported (service_account or authorized_user)", path, c.Type)
	}
}

// EntraTokenSource returns a TokenSource of Microsoft Entra ID tokens for
// an app registration (client credentials grant) with scope, e.g.
// "https://cognitiveservices.azure.com/.default". tokenURL is
// https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token.
func EntraTokenSource(tokenURL, clientID, clientSecret, scope string, client *http.Client) *TokenSource {
	if client == nil {
		client = http.DefaultClient
	}
	return NewTokenSource(func(ctx context.Context) (string, time.Time, error) {
		return grant(ctx, client, tokenURL, url.Values{
			"grant_type": {"client_credentials"}, "client_id": {clientID},
			"client_secret": {clientSecret}, "scope": {scope},
		})
	})
}

// grant posts an OAuth2 token request and reads access_token and
// expires_in from the answer.
func grant(ctx context.Context, client *http.Client, tokenURL string, form url.Values) (string, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token grant: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token grant: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token grant: reading the answer: %w", err)
	}
	var r struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &r)
	if resp.StatusCode != http.StatusOK || r.AccessToken == "" {
		msg := r.Error
		if r.Description != "" {
			msg += ": " + r.Description
		}
		if msg == "" {
			msg = "no access_token in the answer"
		}
		return "", time.Time{}, fmt.Errorf("token grant refused (status %d): %s", resp.StatusCode, msg)
	}
	if r.ExpiresIn <= 0 {
		r.ExpiresIn = 3600
	}
	return r.AccessToken, start.Add(time.Duration(r.ExpiresIn) * time.Second), nil
}

func parseRSAKey(p string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(p))
	if block == nil {
		return nil, errors.New("not a PEM key")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if rk, ok := k.(*rsa.PrivateKey); ok {
			return rk, nil
		}
		return nil, errors.New("not an RSA key")
	}
	return x509.ParsePKCS1PrivateKey(block.Bytes)
}

var b64 = base64.RawURLEncoding

// SignJWT returns a compact RS256 JWT of claims.
func SignJWT(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	hdr := map[string]string{"alg": "RS256", "typ": "JWT"}
	if kid != "" {
		hdr["kid"] = kid
	}
	h, _ := json.Marshal(hdr)
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + b64.EncodeToString(sig), nil
}

// VerifyJWT checks an RS256 JWT's signature against pub and returns its
// claims; the sim's token endpoint uses it to check a JWT-bearer grant.
func VerifyJWT(token string, pub *rsa.PublicKey) (map[string]any, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("jwt: not three parts")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	hb, err := b64.DecodeString(parts[0])
	if err != nil || json.Unmarshal(hb, &hdr) != nil || hdr.Alg != "RS256" {
		return nil, errors.New("jwt: header is not RS256")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, errors.New("jwt: signature is not base64url")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return nil, errors.New("jwt: invalid signature")
	}
	cb, err := b64.DecodeString(parts[1])
	if err != nil {
		return nil, errors.New("jwt: claims are not base64url")
	}
	var claims map[string]any
	if err := json.Unmarshal(cb, &claims); err != nil {
		return nil, errors.New("jwt: claims are not JSON")
	}
	return claims, nil
}
