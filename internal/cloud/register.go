package cloud

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/provider/anthropic"
	"github.com/streamgate/streamgate/internal/provider/converse"
	"github.com/streamgate/streamgate/internal/provider/gemini"
	"github.com/streamgate/streamgate/internal/provider/openai"
)

// The cloud kinds register themselves: importing this package is what
// makes kinds bedrock, vertex and azure usable.
func init() {
	provider.Register("bedrock", newBedrock)
	provider.Register("vertex", newVertex)
	provider.Register("azure", newAzure)
}

func transport(c provider.Config) http.RoundTripper {
	return openai.NewTransport(openai.Options{ConnectTimeout: c.ConnectTimeout, RootCAs: c.RootCAs,
		HTTP2: c.HTTP2 && strings.HasPrefix(strings.ToLower(c.BaseURL), "http://")})
}

func getenv(c provider.Config) func(string) string {
	if c.Cloud.Getenv != nil {
		return c.Cloud.Getenv
	}
	return os.Getenv
}

// newBedrock is kind bedrock: Claude (ids with "anthropic.") through
// InvokeModel under the anthropic adapter, every other model through
// Converse under the converse adapter, one signer (or API key) for both.
func newBedrock(c provider.Config) (provider.Provider, error) {
	endpoint := strings.TrimRight(c.BaseURL, "/")
	if endpoint == "" {
		endpoint = BedrockEndpoint(c.Cloud.Region)
	}
	rt := transport(c)
	b := &Bedrock{Base: rt, Endpoint: endpoint, APIKey: c.APIKey}
	if c.APIKey == "" {
		creds := cloudauth.AWSCredentials{AccessKeyID: c.Cloud.AWSAccessKeyID, SecretAccessKey: c.Cloud.AWSSecretAccessKey, SessionToken: c.Cloud.AWSSessionToken}
		if creds.AccessKeyID == "" {
			var err error
			if creds, err = cloudauth.FindAWSCredentials(getenv(c)); err != nil {
				return nil, err
			}
		}
		b.Signer = &cloudauth.SigV4{Service: "bedrock", Region: c.Cloud.Region, Creds: creds}
	}
	return &bedrock{
		claude:   anthropic.New(endpoint, "", anthropic.Options{Transport: b, ConnectTimeout: c.ConnectTimeout}),
		converse: converse.New(endpoint, converse.Options{Transport: &BedrockAuth{Base: rt, Signer: b.Signer, APIKey: c.APIKey}}),
	}, nil
}

// bedrock is kind bedrock: one adapter per dialect, picked by the route's
// model (IsBedrockAnthropic).
type bedrock struct {
	claude   *anthropic.Client
	converse *converse.Client
}

// bedrock has no Checker: Bedrock's runtime endpoint has no request that
// proves the credentials without spending tokens (its models list is
// another service's), so its health is the requests' (passive).
var _ provider.ModelSpeaker = (*bedrock)(nil)

func (b *bedrock) pick(model string) provider.Provider {
	if IsBedrockAnthropic(model) {
		return b.claude
	}
	return b.converse
}

func (b *bedrock) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	return b.pick(req.Model).Open(ctx, req)
}

func (b *bedrock) Complete(ctx context.Context, req *provider.Request) ([]byte, error) {
	return b.pick(req.Model).Complete(ctx, req)
}

// SpeaksFor implements provider.ModelSpeaker: a Messages client's request
// to Claude passes through as sent; Converse models translate.
func (b *bedrock) SpeaksFor(dialect, model string) bool {
	return IsBedrockAnthropic(model) && b.claude.Speaks(dialect)
}

// CloseIdleConnections closes both adapters' idle connections (one
// transport).
func (b *bedrock) CloseIdleConnections() {
	b.claude.CloseIdleConnections()
	b.converse.CloseIdleConnections()
}

// IsVertexAnthropic reports whether a Vertex model is Claude (publisher
// anthropic, :streamRawPredict) rather than Gemini.
func IsVertexAnthropic(model string) bool { return strings.HasPrefix(model, "claude") }

// vertex is kind vertex: Claude models through the anthropic adapter,
// the others through the gemini adapter, one token source for both.
type vertex struct {
	claude *anthropic.Client
	gemini *gemini.Client
	tokens *cloudauth.TokenSource
}

var (
	_ provider.ModelSpeaker = (*vertex)(nil)
	_ provider.Checker      = (*vertex)(nil)
)

func newVertex(c provider.Config) (provider.Provider, error) {
	host := strings.TrimRight(c.BaseURL, "/")
	if host == "" {
		host = VertexHost(c.Cloud.Region)
	}
	path := c.Cloud.CredentialsFile
	if path == "" {
		var err error
		if path, err = cloudauth.FindGoogleCredentials(getenv(c)); err != nil {
			return nil, err
		}
	}
	rt := transport(c)
	ts, _, err := cloudauth.GoogleTokenSource(path, cloudauth.GoogleScope, &http.Client{Transport: rt})
	if err != nil {
		return nil, err
	}
	return &vertex{
		claude: anthropic.New(host, "", anthropic.Options{Transport: &VertexAnthropic{Base: rt, Publisher: VertexPublisher(host, c.Cloud.Project, c.Cloud.Region, "anthropic"), Tokens: ts}}),
		gemini: gemini.New(VertexPublisher(host, c.Cloud.Project, c.Cloud.Region, "google"), "", gemini.Options{Transport: &Bearer{Base: rt, Tokens: ts}}),
		tokens: ts,
	}, nil
}

func (v *vertex) pick(model string) provider.Provider {
	if IsVertexAnthropic(model) {
		return v.claude
	}
	return v.gemini
}

func (v *vertex) Open(ctx context.Context, req *provider.Request) (provider.Stream, error) {
	return v.pick(req.Model).Open(ctx, req)
}

func (v *vertex) Complete(ctx context.Context, req *provider.Request) ([]byte, error) {
	return v.pick(req.Model).Complete(ctx, req)
}

// SpeaksFor implements provider.ModelSpeaker: a Messages client's request
// to Claude passes through as sent.
func (v *vertex) SpeaksFor(dialect, model string) bool {
	return IsVertexAnthropic(model) && v.claude.Speaks(dialect)
}

// Check implements provider.Checker: a token from the credentials is what
// Vertex's health depends on that no request to a model tells apart.
func (v *vertex) Check(ctx context.Context) error {
	if _, err := v.tokens.Token(ctx); err != nil {
		return &provider.Error{Retryable: true, Message: "vertex credentials", Err: fmt.Errorf("%w: %w", provider.ErrConnect, err)}
	}
	return nil
}

// CloseIdleConnections closes both adapters' idle connections.
func (v *vertex) CloseIdleConnections() {
	v.claude.CloseIdleConnections()
	v.gemini.CloseIdleConnections()
}

// newAzure is kind azure: the openai adapter over Azure's paths, with
// the api-key header or an Entra ID token.
func newAzure(c provider.Config) (provider.Provider, error) {
	base := strings.TrimRight(c.BaseURL, "/")
	rt := transport(c)
	az := &Azure{Base: rt, Resource: base, APIVersion: c.Cloud.APIVersion, APIKey: c.APIKey}
	if c.Cloud.EntraClientID != "" {
		az.APIKey = ""
		az.Tokens = cloudauth.EntraTokenSource(EntraTokenURL(c.Cloud.EntraAuthority, c.Cloud.EntraTenantID),
			c.Cloud.EntraClientID, c.Cloud.EntraClientSecret, EntraScope, &http.Client{Transport: rt})
	}
	return openai.New(base, "", openai.Options{Transport: az, Responses: c.Responses, ConnectTimeout: c.ConnectTimeout}), nil
}

// EntraScope is the scope of Entra ID tokens for Azure OpenAI / Foundry.
const EntraScope = "https://cognitiveservices.azure.com/.default"

// EntraTokenURL is the client-credentials token endpoint of a tenant at an
// authority host ("" is https://login.microsoftonline.com).
func EntraTokenURL(authority, tenant string) string {
	if authority == "" {
		authority = "https://login.microsoftonline.com"
	}
	return strings.TrimRight(authority, "/") + "/" + url.PathEscape(tenant) + "/oauth2/v2.0/token"
}
