package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
)

// DefaultEmbeddingDims is the length of a simulated embedding when the
// request gives no "dimensions".
const DefaultEmbeddingDims = 256

// maxEmbeddingDims bounds "dimensions" (OpenAI's largest model has 3,072).
const maxEmbeddingDims = 4096

// embeddingsRequest is the body of POST /v1/embeddings.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

// embedding is one element of the answer's "data".
type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

// embeddings serves POST /v1/embeddings in OpenAI's format: one unit vector
// per input, a function of the input's text (the same text gives the same
// vector), usage counting the input's tokens. The fail-status fault and its
// headers apply; the stream faults and the pacing do not.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	s.m.requests.Inc()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "",
			"method "+r.Method+" not allowed on /v1/embeddings")
		return
	}
	var req embeddingsRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes)).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", "",
				fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_json", "", "invalid JSON body: "+err.Error())
		return
	}
	inputs, tokens, err := embeddingInputs(req.Input)
	switch {
	case req.Model == "":
		err = paramError{"model", "model is required"}
	case err != nil:
	case req.Dimensions != nil && (*req.Dimensions < 1 || *req.Dimensions > maxEmbeddingDims):
		err = paramError{"dimensions", fmt.Sprintf("dimensions must be between 1 and %d", maxEmbeddingDims)}
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		err = paramError{"encoding_format", `encoding_format must be "float" or "base64"`}
	}
	if err != nil {
		param := ""
		if pe, ok := err.(paramError); ok {
			param = pe.param
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", param, err.Error())
		return
	}
	p := s.profileFor(req.Model)
	var seed int64
	var seedSet, redacted bool
	if err := applyHeaders(r.Header, &p, &seed, &seedSet, &redacted); err != nil {
		var he *headerError
		param := ""
		if errors.As(err, &he) {
			param = he.header
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_sim_header", param, err.Error())
		return
	}
	n := s.counter.Add(1)
	fr := rand.New(rand.NewPCG(splitmix64(uint64(s.opts.Seed)+n), 3))
	if f := p.Faults; hits(fr.Float64(), f.FailStatus != 0, f.FailRate) {
		s.m.faults.WithLabelValues(faultFail).Inc()
		writeFailure(w, cmpOr(f.FailStatus, DefaultFailStatus))
		return
	}
	dims := DefaultEmbeddingDims
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	data := make([]embedding, len(inputs))
	for i, in := range inputs {
		v := embedVector(in, dims)
		data[i] = embedding{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
	}
	w.Header().Set("X-Request-Id", "emb-sim"+strconv.FormatUint(n, 36))
	w.Header().Set("X-Sim-Profile", p.Name)
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   data,
		"model":  req.Model,
		"usage":  map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

// embeddingInputs reads "input" in its four OpenAI forms: a string, an array
// of strings, an array of token ids, an array of arrays of token ids. It
// returns one text per embedding (token ids written out) and the tokens.
func embeddingInputs(raw json.RawMessage) (inputs []string, tokens int, err error) {
	const want = "input must be a non-empty string, array of strings, array of token ids or array of arrays of token ids"
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, 0, paramError{"input", want}
		}
		return []string{one}, max(1, estimateTokens(one)), nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		for _, s := range many {
			if s == "" {
				return nil, 0, paramError{"input", want}
			}
			tokens += max(1, estimateTokens(s))
		}
		return many, tokens, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []string{fmt.Sprint(ids)}, len(ids), nil
	}
	var idss [][]int64
	if json.Unmarshal(raw, &idss) == nil && len(idss) > 0 {
		for _, ids := range idss {
			if len(ids) == 0 {
				return nil, 0, paramError{"input", want}
			}
			inputs = append(inputs, fmt.Sprint(ids))
			tokens += len(ids)
		}
		return inputs, tokens, nil
	}
	return nil, 0, paramError{"input", want}
}

// embedVector is a unit vector of dims components drawn from a generator
// seeded by the text.
func embedVector(text string, dims int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	r := rand.New(rand.NewPCG(h.Sum64(), 4))
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		f := r.NormFloat64()
		v[i] = float32(f)
		norm += f * f
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}
