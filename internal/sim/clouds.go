package sim

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/cloudauth"
)

// vertexTokens are the access tokens the simulator's token endpoint
// granted, with their expiry.
type vertexTokens struct {
	mu     sync.Mutex
	tokens map[string]time.Time
	grants int
}

// googleToken serves POST /token, a Google OAuth2 token endpoint: a
// JWT-bearer grant whose assertion is signed by one of
// Options.GoogleKeys, with aud this endpoint and the cloud-platform scope,
// gets an access token valid for an hour; anything else is refused as
// Google refuses it (400 invalid_grant).
func (s *Server) googleToken(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	fail := func(msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		b, _ := json.Marshal(map[string]string{"error": "invalid_grant", "error_description": msg})
		w.Write(b)
	}
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		fail("grant_type must be urn:ietf:params:oauth:grant-type:jwt-bearer")
		return
	}
	var claims map[string]any
	var err error = fmt.Errorf("no key is registered with the simulator's token endpoint")
	for _, k := range s.opts.GoogleKeys {
		if claims, err = cloudauth.VerifyJWT(r.Form.Get("assertion"), k); err == nil {
			break
		}
	}
	if err != nil {
		fail("Invalid JWT Signature.")
		return
	}
	exp, _ := claims["exp"].(float64)
	if scope, _ := claims["scope"].(string); !strings.Contains(scope, cloudauth.GoogleScope) {
		fail("Invalid OAuth scope or ID token audience provided.")
		return
	}
	if time.Unix(int64(exp), 0).Before(time.Now()) {
		fail("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	tok := "ya29.sim-" + hex.EncodeToString(b)
	s.gtokens.mu.Lock()
	if s.gtokens.tokens == nil {
		s.gtokens.tokens = map[string]time.Time{}
	}
	s.gtokens.tokens[tok] = time.Now().Add(time.Hour)
	s.gtokens.grants++
	s.gtokens.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "expires_in": 3599, "token_type": "Bearer"})
}

// TokenGrants reports how many access tokens the token endpoint granted.
func (s *Server) TokenGrants() int {
	s.gtokens.mu.Lock()
	defer s.gtokens.mu.Unlock()
	return s.gtokens.grants
}

// vertexAuth checks a Vertex request's bearer token.
func (s *Server) vertexAuth(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	s.gtokens.mu.Lock()
	defer s.gtokens.mu.Unlock()
	exp, ok := s.gtokens.tokens[tok]
	return ok && time.Now().Before(exp)
}

// googleError writes a Google API error.
func googleAPIError(w http.ResponseWriter, status int, state, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": state}})
}

// vertex serves Vertex AI's publisher model paths,
// /v1/projects/{project}/locations/{region}/publishers/{google|anthropic}/models/{model}:{method}:
// Gemini's :generateContent, :streamGenerateContent?alt=sse and
// :countTokens are served by the Gemini dialect; Claude's :rawPredict and
// :streamRawPredict by the Anthropic dialect, with the body as Vertex
// wants it (anthropic_version "vertex-2023-10-16", no "model"). Every
// request needs a bearer token from the simulator's /token endpoint; the
// prompt cache is the token's project's.
func (s *Server) vertexModels(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	// projects {p} locations {r} publishers {pub} models {model:method}
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "publishers" || parts[6] != "models" {
		s.m.requests.Inc()
		googleAPIError(w, http.StatusNotFound, "NOT_FOUND", "unknown path "+r.URL.Path)
		return
	}
	project, publisher := parts[1], parts[5]
	if !s.vertexAuth(r) {
		s.m.requests.Inc()
		googleAPIError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("Authorization")
	r2.Header.Set("X-Api-Key", "vertex:"+project)
	switch publisher {
	case "google":
		r2.URL.Path = "/v1beta/models/" + parts[7]
		r2.Header.Set("X-Goog-Api-Key", "vertex:"+project)
		s.geminiModels(w, r2)
	case "anthropic":
		model, method, _ := strings.Cut(parts[7], ":")
		if method != "rawPredict" && method != "streamRawPredict" {
			s.m.requests.Inc()
			googleAPIError(w, http.StatusNotFound, "NOT_FOUND", "unknown method "+method+" (rawPredict, streamRawPredict)")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		var obj map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(body, &obj)
		}
		if err != nil {
			s.m.requests.Inc()
			googleAPIError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "invalid JSON body")
			return
		}
		if _, ok := obj["model"]; ok {
			s.m.requests.Inc()
			anthropicDialect{}.writeError(w, http.StatusBadRequest, "model: Extra inputs are not permitted (the model is in the URL)")
			return
		}
		if string(obj["anthropic_version"]) != `"vertex-2023-10-16"` {
			s.m.requests.Inc()
			anthropicDialect{}.writeError(w, http.StatusBadRequest, "anthropic_version: must be vertex-2023-10-16")
			return
		}
		delete(obj, "anthropic_version")
		obj["model"], _ = json.Marshal(model)
		if method == "rawPredict" {
			obj["stream"] = json.RawMessage("false")
		}
		inner, _ := json.Marshal(obj)
		r2.Body = io.NopCloser(bytes.NewReader(inner))
		r2.ContentLength = int64(len(inner))
		s.messages(false)(w, r2)
	default:
		s.m.requests.Inc()
		googleAPIError(w, http.StatusNotFound, "NOT_FOUND", "Publisher model "+publisher+" not found")
	}
}

// azure serves Azure OpenAI's paths: /openai/deployments/{deployment}/chat/completions
// and /embeddings with ?api-version= (required), and the v1 path
// /openai/v1/chat/completions, /embeddings and /responses (the model in the
// body is the deployment). It wants the key in the api-key header (or an
// Entra ID bearer token its token endpoint granted), and streams as Azure does: a first chunk with no
// choices that carries prompt_filter_results, content_filter_results on
// each choice, and a filter-only chunk after the finish.
func (s *Server) azure(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/openai")
	key := r.Header.Get("Api-Key")
	if key == "" {
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if !s.entraValid(b) {
				s.m.requests.Inc()
				writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "401", "message": "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired."}})
				return
			}
			key = "entra" // the prompt cache of the Entra-authenticated callers
		}
	}
	if key == "" {
		s.m.requests.Inc()
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]string{"code": "401", "message": "Access denied due to missing subscription key. Make sure to include subscription key when making requests to an API."}})
		return
	}
	var op, deployment string
	if rest, ok := strings.CutPrefix(path, "/deployments/"); ok {
		deployment, op, _ = strings.Cut(rest, "/")
		op = "/" + op
		if r.URL.Query().Get("api-version") == "" {
			s.m.requests.Inc()
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "404", "message": "Resource not found"}})
			return
		}
	} else if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
		op = "/" + rest
	} else if path == "/responses" && r.URL.Query().Get("api-version") != "" {
		op = "/responses"
	}
	r2 := r.Clone(r.Context())
	r2.Header.Del("Api-Key")
	r2.Header.Set("X-Api-Key", key)
	if deployment != "" {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
		var obj map[string]json.RawMessage
		if err == nil {
			err = json.Unmarshal(body, &obj)
		}
		if err != nil {
			s.m.requests.Inc()
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "", "invalid JSON body")
			return
		}
		obj["model"], _ = json.Marshal(deployment)
		inner, _ := json.Marshal(obj)
		r2.Body = io.NopCloser(bytes.NewReader(inner))
		r2.ContentLength = int64(len(inner))
	}
	switch op {
	case "/chat/completions":
		s.chat(&azureWriter{w: w}, r2)
	case "/embeddings":
		s.embeddings(w, r2)
	case "/responses":
		if bytes.Contains(peekBody(r2), []byte(`"stream_options"`)) {
			s.m.requests.Inc()
			writeError(w, http.StatusBadRequest, "invalid_request_error", "unknown_parameter", "stream_options", "Unknown parameter: 'stream_options'.")
			return
		}
		s.responses(w, r2)
	default:
		s.m.requests.Inc()
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{"code": "404", "message": "Resource not found"}})
	}
}

// peekBody reads a request's body and puts it back.
func peekBody(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes))
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

const azureFilterResults = `{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`

// azureWriter adds Azure's extra chunks to an OpenAI chat stream: the
// prompt filter results first, a filter-only chunk after the finish.
type azureWriter struct {
	w        http.ResponseWriter
	started  bool
	finished bool
	pending  []byte
}

func (a *azureWriter) Header() http.Header         { return a.w.Header() }
func (a *azureWriter) WriteHeader(status int)      { a.w.WriteHeader(status) }
func (a *azureWriter) Unwrap() http.ResponseWriter { return a.w }
func (a *azureWriter) Flush() {
	if f, ok := a.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (a *azureWriter) Write(p []byte) (int, error) {
	if !strings.HasPrefix(a.w.Header().Get("Content-Type"), "text/event-stream") {
		return a.w.Write(p)
	}
	a.pending = append(a.pending, p...)
	var out []byte
	for {
		i := bytes.Index(a.pending, []byte("\n\n"))
		if i < 0 {
			break
		}
		ev := a.pending[:i+2]
		if !a.started && bytes.HasPrefix(ev, []byte("data: {")) {
			a.started = true
			out = append(out, `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":`+azureFilterResults+`}]}`+"\n\n"...)
		}
		out = append(out, ev...)
		if !a.finished && bytes.Contains(ev, []byte(`"finish_reason":"`)) {
			a.finished = true
			out = append(out, `data: {"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":1},"content_filter_results":`+azureFilterResults+`,"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":"chat.completion.chunk"}`+"\n\n"...)
		}
		a.pending = a.pending[i+2:]
	}
	if len(out) > 0 {
		if _, err := a.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// SimEntraApps is the Entra ID app registration the token endpoint
// accepts when Options.EntraApps names none.
var SimEntraApps = map[string]string{"00000000-0000-0000-0000-00000000a2e0": "sim-entra-client-secret"}

// entraToken serves POST /{tenant}/oauth2/v2.0/token, Microsoft Entra ID's
// token endpoint, for the client-credentials grant: a registered client id
// with its secret and a "/.default" scope gets a JWT-shaped access token
// valid for an hour (Azure's bearer tokens); anything else is refused in
// Entra's words (AADSTS codes).
func (s *Server) entraToken(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	fail := func(status int, code, msg string) {
		writeJSON(w, status, map[string]any{"error": code, "error_description": msg, "error_codes": []int{}})
	}
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		fail(http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must contain the following parameter: 'grant_type'.")
		return
	}
	f := r.Form
	if f.Get("grant_type") != "client_credentials" {
		fail(http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.")
		return
	}
	if !strings.HasSuffix(f.Get("scope"), "/.default") {
		fail(http.StatusBadRequest, "invalid_scope", "AADSTS1002012: The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.")
		return
	}
	apps := s.opts.EntraApps
	if apps == nil {
		apps = SimEntraApps
	}
	secret, ok := apps[f.Get("client_id")]
	switch {
	case !ok:
		fail(http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+f.Get("client_id")+"' was not found in the directory.")
		return
	case f.Get("client_secret") != secret:
		fail(http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.")
		return
	}
	b := make([]byte, 24)
	rand.Read(b)
	enc := base64.RawURLEncoding
	tok := enc.EncodeToString([]byte(`{"typ":"JWT","alg":"RS256"}`)) + "." +
		enc.EncodeToString(fmt.Appendf(nil, `{"aud":%q,"appid":%q,"exp":%d}`, strings.TrimSuffix(f.Get("scope"), "/.default"), f.Get("client_id"), time.Now().Add(time.Hour).Unix())) +
		"." + enc.EncodeToString(b)
	s.etokens.mu.Lock()
	if s.etokens.tokens == nil {
		s.etokens.tokens = map[string]time.Time{}
	}
	s.etokens.tokens[tok] = time.Now().Add(time.Hour)
	s.etokens.grants++
	s.etokens.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": tok})
}

// EntraGrants reports how many Entra ID tokens the token endpoint granted.
func (s *Server) EntraGrants() int {
	s.etokens.mu.Lock()
	defer s.etokens.mu.Unlock()
	return s.etokens.grants
}

// entraValid reports whether tok is an Entra ID token the simulator
// granted and that has not expired.
func (s *Server) entraValid(tok string) bool {
	s.etokens.mu.Lock()
	defer s.etokens.mu.Unlock()
	exp, ok := s.etokens.tokens[tok]
	return ok && time.Now().Before(exp)
}
