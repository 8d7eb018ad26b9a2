package cloud

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/provider/gemini"
	"github.com/streamgate/streamgate/internal/provider/openai"
	"github.com/streamgate/streamgate/internal/sim"
)

// vertexSim serves the simulator with a service account's key registered
// at its token endpoint, and writes that account's credentials file.
func vertexSim(t *testing.T) (*httptest.Server, *sim.Server, string) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Options{Seed: 7, Profile: sim.Profile{Name: "fast", TTFT: 1e6, ITL: 1e5, Tokens: 20}, GoogleKeys: []*rsa.PublicKey{&key.PublicKey}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "gw@proj.iam.gserviceaccount.com", "private_key_id": "k",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": srv.URL + "/token",
	})
	path := filepath.Join(t.TempDir(), "sa.json")
	os.WriteFile(path, sa, 0o600)
	return srv, s, path
}

// TestVertex: Gemini and Claude on (simulated) Vertex AI through the
// gemini and anthropic adapters, streamed and not, with a token from a
// service account's JWT-bearer grant: ten requests, one grant; a request
// without a valid token is refused as Vertex refuses it.
func TestVertex(t *testing.T) {
	srv, s, sa := vertexSim(t)
	ts, _, err := cloudauth.GoogleTokenSource(sa, cloudauth.GoogleScope, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	rt := srv.Client().Transport
	gem := gemini.New(VertexPublisher(srv.URL, "proj", "us-east5", "google"), "", gemini.Options{Transport: &Bearer{Base: rt, Tokens: ts}})
	claude := anthropic.New(srv.URL, "", anthropic.Options{Transport: &VertexAnthropic{Base: rt, Publisher: VertexPublisher(srv.URL, "proj", "us-east5", "anthropic"), Tokens: ts}})
	defer gem.CloseIdleConnections()
	defer claude.CloseIdleConnections()
	for i := range 5 {
		for name, p := range map[string]provider.Provider{"gemini-2.5-flash": gem, "claude-sonnet-4-5@20250929": claude} {
			stream := i%2 == 0
			req := chatRequest(t, name, stream)
			if stream {
				st, err := p.Open(context.Background(), req)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				text, usage, err := readStream(t, st)
				if err != nil || text == "" || usage == nil || usage.CompletionTokens == 0 {
					t.Errorf("%s: got %q usage %+v, %v", name, text, usage, err)
				}
			} else {
				b, err := p.Complete(context.Background(), req)
				var cc api.Completion
				if err != nil || json.Unmarshal(b, &cc) != nil || len(cc.Choices) == 0 || cc.Choices[0].Message.Content == "" {
					t.Errorf("%s: got %s, %v", name, b, err)
				}
			}
		}
	}
	if n := s.TokenGrants(); n != 1 {
		t.Errorf("got %d token grants for 10 requests, want 1", n)
	}
	// A token the endpoint did not grant.
	bad := cloudauth.NewTokenSource(func(context.Context) (string, time.Time, error) { return "ya29.forged", time.Now().Add(time.Hour), nil })
	g2 := gemini.New(VertexPublisher(srv.URL, "proj", "global", "google"), "", gemini.Options{Transport: &Bearer{Base: rt, Tokens: bad}})
	defer g2.CloseIdleConnections()
	_, err = g2.Open(context.Background(), chatRequest(t, "gemini-2.5-flash", true))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized {
		t.Errorf("forged token: got %v, want a 401", err)
	}
}

func TestVertexHost(t *testing.T) {
	if got := VertexHost("global"); got != "https://aiplatform.googleapis.com" {
		t.Errorf("global: got %s", got)
	}
	if got := VertexHost("us-east5"); got != "https://us-east5-aiplatform.googleapis.com" {
		t.Errorf("us-east5: got %s", got)
	}
}

// TestAzure: chat through the openai adapter on Azure's deployment path
// (api-version) and v1 path, with the api-key header: the text arrives, and
// Azure's extra chunks (no choices first, filter-only after the finish)
// are gone from the stream the adapter hands on.
func TestAzure(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Options{Seed: 7, Profile: sim.Profile{Name: "fast", TTFT: 1e6, ITL: 1e5, Tokens: 20}}))
	defer srv.Close()
	for _, version := range []string{"2024-10-21", ""} {
		az := &Azure{Base: srv.Client().Transport, Resource: srv.URL, APIVersion: version, APIKey: "azure-key"}
		c := openai.New(srv.URL, "", openai.Options{Transport: az})
		st, err := c.Open(context.Background(), chatRequest(t, "my-gpt-deployment", true))
		if err != nil {
			t.Fatalf("api-version %q: %v", version, err)
		}
		var chunks []string
		for {
			ev, err := st.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("api-version %q: %v", version, err)
			}
			if len(ev.Data) > 0 {
				chunks = append(chunks, string(ev.Data))
			}
		}
		st.Close()
		all := strings.Join(chunks, "\n")
		if strings.Contains(all, `"choices":[]`) && !strings.Contains(all, `"usage"`) || strings.Contains(all, "content_filter_offsets") {
			t.Errorf("api-version %q: Azure's extra chunks reached the adapter:\n%s", version, all)
		}
		if !strings.Contains(all, `"content"`) {
			t.Errorf("api-version %q: no text:\n%s", version, all)
		}
		c.CloseIdleConnections()
	}
	// The simulated Azure does send them: the filter is what removes them.
	req, _ := http.NewRequest("POST", srv.URL+"/openai/deployments/d/chat/completions?api-version=2024-10-21",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5}`))
	req.Header.Set("Api-Key", "k")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(raw), `"choices":[],`) || !strings.Contains(string(raw), "content_filter_offsets") {
		t.Errorf("the simulated Azure stream lacks Azure's extra chunks:\n%s", raw)
	}
	// No key: Azure's 401.
	c := openai.New(srv.URL, "", openai.Options{Transport: &Azure{Base: srv.Client().Transport, Resource: srv.URL, APIVersion: "2024-10-21"}})
	defer c.CloseIdleConnections()
	_, err = c.Open(context.Background(), chatRequest(t, "d", true))
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusUnauthorized {
		t.Errorf("no key: got %v, want 401", err)
	}
}

// TestAzureEntra: kind azure with an Entra ID app registration: the
// client-credentials grant at the (simulated) tenant's token endpoint, the
// token sent as a bearer (no api-key), one grant for many requests; a
// wrong secret fails before anything reaches Azure, in Entra's words.
func TestAzureEntra(t *testing.T) {
	s := sim.New(sim.Options{Seed: 7, Profile: sim.Profile{Name: "fast", TTFT: 1e6, ITL: 1e5, Tokens: 20}})
	srv := httptest.NewServer(s)
	defer srv.Close()
	var client, secret string
	for client, secret = range sim.SimEntraApps {
	}
	cfg := provider.Config{Kind: "azure", BaseURL: srv.URL, Cloud: provider.Cloud{APIVersion: "2024-10-21",
		EntraTenantID: "contoso", EntraClientID: client, EntraClientSecret: secret, EntraAuthority: srv.URL}}
	p, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	for range 3 {
		st, err := p.Open(context.Background(), chatRequest(t, "gpt-deployment", true))
		if err != nil {
			t.Fatal(err)
		}
		if text, _, err := readStream(t, st); err != nil || text == "" {
			t.Fatalf("got %q, %v", text, err)
		}
	}
	if n := s.EntraGrants(); n != 1 {
		t.Errorf("%d grants for 3 requests, want 1", n)
	}
	cfg.Cloud.EntraClientSecret = "wrong"
	bad, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	_, err = bad.Open(context.Background(), chatRequest(t, "gpt-deployment", true))
	if err == nil || !strings.Contains(err.Error(), "AADSTS7000215") {
		t.Errorf("wrong secret: got %v, want Entra's AADSTS7000215", err)
	}
	if got := EntraTokenURL("", "contoso"); got != "https://login.microsoftonline.com/contoso/oauth2/v2.0/token" {
		t.Errorf("token URL: got %s", got)
	}
}
