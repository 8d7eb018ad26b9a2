package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/cloudauth"
	"github.com/streamgate/streamgate/internal/eventstream"
)

// SimAWSCredentials are the AWS credentials the simulator's Bedrock
// endpoints accept when Options.AWSCredentials names none.
var SimAWSCredentials = cloudauth.AWSCredentials{AccessKeyID: "AKIASIMULATOR0000000", SecretAccessKey: "sim-secret-access-key"}

// bedrockInvoke serves Bedrock's POST /model/{modelId}/invoke and
// /invoke-with-response-stream for Claude models (and /converse and
// /converse-stream for any model: bedrockConverse), as strictly as Bedrock:
// a SigV4 signature for the bedrock service (verified against the
// simulator's AWS credentials; a wrong one is refused 403 with AWS's
// words) or a Bedrock API key as a bearer token; a body with
// anthropic_version "bedrock-2023-05-31" and neither "model" nor "stream"
// (Bedrock refuses extraneous keys). The request is then served by the
// Anthropic dialect, its events wrapped in event-stream chunk frames
// (base64 "bytes") with Bedrock's invocation metrics on message_stop, and
// its errors in AWS's shape (x-amzn-ErrorType, {"message"}); an error
// event mid-stream becomes an exception frame.
func (s *Server) bedrockInvoke(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	var model, op string
	if ok {
		i := strings.LastIndexByte(rest, '/')
		if i > 0 {
			model, op = rest[:i], rest[i+1:]
		}
	}
	if op != "invoke" && op != "invoke-with-response-stream" && op != "converse" && op != "converse-stream" {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusNotFound, "UnknownOperationException", "unknown operation "+r.URL.Path)
		return
	}
	if m, err := unescapePath(model); err == nil {
		model = m
	}
	if r.Method != http.MethodPost {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusMethodNotAllowed, "ValidationException", "method "+r.Method+" not allowed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusRequestEntityTooLarge, "ValidationException", "request body too large")
		return
	}
	owner, err := s.bedrockAuth(r, body)
	if err != nil {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusForbidden, "InvalidSignatureException", err.Error())
		return
	}
	if op == "converse" || op == "converse-stream" {
		s.bedrockConverse(w, r, model, body, owner, op == "converse-stream")
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusBadRequest, "ValidationException", "Malformed input request: "+err.Error())
		return
	}
	for _, k := range []string{"model", "stream"} {
		if _, ok := obj[k]; ok {
			s.m.requests.Inc()
			awsErrorAnswer(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: extraneous key ["+k+"] is not permitted, please reformat your input and try again.")
			return
		}
	}
	if v := string(obj["anthropic_version"]); v != `"bedrock-2023-05-31"` {
		s.m.requests.Inc()
		awsErrorAnswer(w, http.StatusBadRequest, "ValidationException", "Malformed input request: anthropic_version: "+v+" is not supported (bedrock-2023-05-31)")
		return
	}
	stream := op == "invoke-with-response-stream"
	delete(obj, "anthropic_version")
	if betas, ok := obj["anthropic_beta"]; ok {
		var names []string
		if json.Unmarshal(betas, &names) != nil {
			s.m.requests.Inc()
			awsErrorAnswer(w, http.StatusBadRequest, "ValidationException", "Malformed input request: anthropic_beta must be an array of strings")
			return
		}
		delete(obj, "anthropic_beta")
		r.Header.Set("Anthropic-Beta", strings.Join(names, ","))
	}
	obj["model"], _ = json.Marshal(model)
	obj["stream"], _ = json.Marshal(stream)
	inner, _ := json.Marshal(obj)
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(inner))
	r2.ContentLength = int64(len(inner))
	r2.Header.Del("Authorization")
	r2.Header.Set("X-Api-Key", owner) // the prompt cache is the credential's
	bw := &bedrockWriter{w: w, stream: stream}
	s.messages(false)(bw, r2)
	bw.finish()
}

// bedrockAuth checks a request's credentials and returns the cache owner:
// the access key id of a valid SigV4 signature, or a bearer API key.
func (s *Server) bedrockAuth(r *http.Request, body []byte) (string, error) {
	auth := r.Header.Get("Authorization")
	if k, ok := strings.CutPrefix(auth, "Bearer "); ok && k != "" {
		return k, nil
	}
	creds := s.opts.AWSCredentials
	if len(creds) == 0 {
		creds = []cloudauth.AWSCredentials{SimAWSCredentials}
	}
	var id string
	err := cloudauth.VerifySigV4(r, "bedrock", cloudauth.PayloadHash(body), time.Now(), func(k string) (cloudauth.AWSCredentials, bool) {
		for _, c := range creds {
			if c.AccessKeyID == k {
				id = k
				return c, true
			}
		}
		return cloudauth.AWSCredentials{}, false
	})
	if err != nil {
		if auth == "" {
			return "", fmt.Errorf("Missing Authentication Token")
		}
		return "", err
	}
	return id, nil
}

func unescapePath(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			n, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
			if err != nil {
				return "", err
			}
			b.WriteByte(byte(n))
			i += 2
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String(), nil
}

// awsErrorAnswer writes an AWS JSON error: its name in x-amzn-ErrorType,
// {"message": …} in the body.
func awsErrorAnswer(w http.ResponseWriter, status int, name, msg string) {
	w.Header().Set("X-Amzn-Errortype", name)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Write(b)
}

// bedrockWriter is the ResponseWriter the Anthropic dialect answers a
// Bedrock request through: SSE events become event-stream frames, an
// error answer AWS's error shape.
type bedrockWriter struct {
	w       http.ResponseWriter
	stream  bool
	status  int
	pending []byte // SSE bytes not yet a whole event
	errBody []byte
	frame   []byte
	input   int // usage for the invocation metrics
	output  int
	start   time.Time
	first   time.Duration
	// converse, when not nil, answers in Converse's events and shapes
	// rather than InvokeModel's.
	converse *converseState
}

func (b *bedrockWriter) Header() http.Header { return b.w.Header() }

func (b *bedrockWriter) WriteHeader(status int) {
	if b.status != 0 {
		return
	}
	b.status = status
	b.start = time.Now()
	if status/100 != 2 {
		return // written by finish, in AWS's shape
	}
	if b.stream {
		b.w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	}
	b.w.Header().Del("Content-Length")
	if !b.stream && b.converse != nil {
		return // written by finish, as a ConverseResponse
	}
	b.w.WriteHeader(status)
}

func (b *bedrockWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.WriteHeader(http.StatusOK)
	}
	if b.status/100 != 2 {
		b.errBody = append(b.errBody, p...)
		return len(p), nil
	}
	if !b.stream {
		if b.converse != nil {
			b.converse.body = append(b.converse.body, p...) // rewritten at finish
			return len(p), nil
		}
		return b.w.Write(p)
	}
	b.pending = append(b.pending, p...)
	for {
		i := bytes.Index(b.pending, []byte("\n\n"))
		if i < 0 {
			break
		}
		if err := b.event(b.pending[:i]); err != nil {
			return 0, err
		}
		b.pending = b.pending[i+2:]
	}
	return len(p), nil
}

// Flush passes the stream's flushes on.
func (b *bedrockWriter) Flush() {
	if f, ok := b.w.(http.Flusher); ok && b.status/100 == 2 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (b *bedrockWriter) Unwrap() http.ResponseWriter { return b.w }

// event writes one SSE event as a frame.
func (b *bedrockWriter) event(ev []byte) error {
	var name, data []byte
	for _, line := range bytes.Split(ev, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("event: ")):
			name = line[len("event: "):]
		case bytes.HasPrefix(line, []byte("data: ")):
			data = line[len("data: "):]
		}
	}
	if data == nil {
		return nil // comments (--stamp) have no frame of their own
	}
	if string(name) == "error" {
		var e struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		json.Unmarshal(data, &e)
		exc := "internalServerException"
		switch e.Error.Type {
		case "overloaded_error":
			exc = "serviceUnavailableException"
		case "rate_limit_error":
			exc = "throttlingException"
		}
		msg, _ := json.Marshal(map[string]string{"message": e.Error.Message})
		return b.writeFrame([]eventstream.Header{
			eventstream.StringHeader(":exception-type", exc),
			eventstream.StringHeader(":content-type", "application/json"),
			eventstream.StringHeader(":message-type", "exception"),
		}, msg)
	}
	if b.converse != nil {
		return b.converseEvent(string(name), data)
	}
	var head struct {
		Type    string `json:"type"`
		Message struct {
			Usage struct {
				Input int `json:"input_tokens"`
			} `json:"usage"`
		} `json:"message"`
		Usage struct {
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	json.Unmarshal(data, &head)
	switch head.Type {
	case "message_start":
		b.input = head.Message.Usage.Input
	case "content_block_delta":
		if b.first == 0 {
			b.first = time.Since(b.start)
		}
	case "message_delta":
		b.output = head.Usage.Output
	case "message_stop":
		// Bedrock adds its invocation metrics to the last event.
		data = fmt.Appendf(nil, `{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":%d,"outputTokenCount":%d,"invocationLatency":%d,"firstByteLatency":%d}}`,
			b.input, b.output, time.Since(b.start).Milliseconds(), b.first.Milliseconds())
	}
	payload := append([]byte(`{"bytes":"`), base64.StdEncoding.AppendEncode(nil, data)...)
	payload = append(payload, `","p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"}`...)
	return b.writeFrame([]eventstream.Header{
		eventstream.StringHeader(":event-type", "chunk"),
		eventstream.StringHeader(":content-type", "application/json"),
		eventstream.StringHeader(":message-type", "event"),
	}, payload)
}

func (b *bedrockWriter) writeFrame(h []eventstream.Header, payload []byte) error {
	var err error
	b.frame, err = eventstream.AppendMessage(b.frame[:0], h, payload)
	if err != nil {
		return err
	}
	_, err = b.w.Write(b.frame)
	return err
}

// finish writes an error answer in AWS's shape, and a non-streamed
// Converse answer as a ConverseResponse.
func (b *bedrockWriter) finish() {
	if b.status/100 == 2 && !b.stream && b.converse != nil {
		out := converseAnswer(b.converse.body, time.Since(b.start))
		b.w.Header().Set("Content-Type", "application/json")
		b.w.WriteHeader(b.status)
		b.w.Write(out)
		return
	}
	if b.status/100 == 2 || b.status == 0 {
		return
	}
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	json.Unmarshal(b.errBody, &e)
	name := "ValidationException"
	switch e.Error.Type {
	case "rate_limit_error":
		name = "ThrottlingException"
	case "overloaded_error":
		name = "ServiceUnavailableException"
	case "api_error":
		name = "InternalServerException"
	case "not_found_error":
		name = "ResourceNotFoundException"
	case "permission_error", "authentication_error":
		name = "AccessDeniedException"
	}
	if e.Error.Message == "" {
		e.Error.Message = strings.TrimSpace(string(b.errBody))
	}
	b.w.Header().Del("Content-Length")
	awsErrorAnswer(b.w, b.status, name, e.Error.Message)
}
