package bench

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/streamgate/streamgate/internal/api"
)

//go:embed prompts/*.jsonl
var builtinPrompts embed.FS

// Prompt is one request of a dataset: the messages sent and, when the
// dataset knows it, a typical answer length used as max_tokens when the
// run sets none (0 = leave max_tokens out).
type Prompt struct {
	Messages  []api.Message
	MaxTokens int
}

// LoadPrompts reads a dataset named by spec:
//
//	builtin:en, builtin:ko  embedded prompts of varied length (Korean in Hangul)
//	sharegpt:FILE           ShareGPT JSON: [{"conversations":[{"from":"human","value":...},{"from":"gpt",...}]}]
//	FILE.json               the same ShareGPT layout
//	FILE.jsonl (any other)  lines of {"messages":[...]} or {"prompt":"..."}, optional "max_tokens"
//
// An empty spec means builtin:en. A bad line is an error naming file:line.
func LoadPrompts(spec string) ([]Prompt, error) {
	switch {
	case spec == "" || spec == "builtin:en":
		return readBuiltin("en")
	case spec == "builtin:ko":
		return readBuiltin("ko")
	case strings.HasPrefix(spec, "builtin:"):
		return nil, fmt.Errorf("prompts %q: unknown builtin set (want builtin:en or builtin:ko)", spec)
	case strings.HasPrefix(spec, "sharegpt:"):
		return readShareGPTFile(strings.TrimPrefix(spec, "sharegpt:"))
	case strings.HasSuffix(spec, ".json"):
		return readShareGPTFile(spec)
	}
	f, err := os.Open(spec)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	defer f.Close()
	return ReadJSONL(f, spec)
}

func readBuiltin(lang string) ([]Prompt, error) {
	b, err := builtinPrompts.ReadFile("prompts/" + lang + ".jsonl")
	if err != nil {
		return nil, fmt.Errorf("prompts builtin:%s: %w", lang, err)
	}
	return ReadJSONL(bytes.NewReader(b), "builtin:"+lang)
}

// ReadJSONL reads prompts from JSON lines of {"messages":[...]} or
// {"prompt":"..."} with an optional "max_tokens". Blank lines are skipped;
// name is used in errors ("name:line: ...").
func ReadJSONL(r io.Reader, name string) ([]Prompt, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var out []Prompt
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var row struct {
			Messages  []api.Message `json:"messages"`
			Prompt    *string       `json:"prompt"`
			MaxTokens int           `json:"max_tokens"`
		}
		if err := json.Unmarshal(b, &row); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		p := Prompt{Messages: row.Messages, MaxTokens: row.MaxTokens}
		switch {
		case len(row.Messages) > 0 && row.Prompt != nil:
			return nil, fmt.Errorf("%s:%d: both \"messages\" and \"prompt\" given", name, line)
		case row.Prompt != nil:
			p.Messages = []api.Message{api.TextMessage("user", *row.Prompt)}
		case len(row.Messages) == 0:
			return nil, fmt.Errorf("%s:%d: want {\"messages\":[...]} or {\"prompt\":\"...\"}", name, line)
		}
		for i, m := range p.Messages {
			if m.Role == "" {
				return nil, fmt.Errorf("%s:%d: message %d has no role", name, line, i)
			}
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", name)
	}
	return out, nil
}

func readShareGPTFile(path string) ([]Prompt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompts: %w", err)
	}
	return ReadShareGPT(b, path)
}

// ReadShareGPT reads the ShareGPT layout: an array of conversations whose
// first "human" turn becomes the prompt and whose following "gpt" turn gives
// the answer length (about 4 bytes a token, as vLLM's benchmark estimates
// it). Conversations without both turns are skipped.
func ReadShareGPT(b []byte, name string) ([]Prompt, error) {
	var rows []struct {
		Conversations []struct {
			From  string `json:"from"`
			Value string `json:"value"`
		} `json:"conversations"`
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("%s: sharegpt: %w", name, err)
	}
	var out []Prompt
	for _, r := range rows {
		c := r.Conversations
		if len(c) < 2 || c[0].From != "human" || c[1].From != "gpt" || c[0].Value == "" {
			continue
		}
		out = append(out, Prompt{
			Messages:  []api.Message{api.TextMessage("user", c[0].Value)},
			MaxTokens: max(1, (len(c[1].Value)+3)/4),
		})
	}
	if len(out) == 0 {
		return nil, errors.New(name + ": sharegpt: no conversation with a human turn followed by a gpt turn")
	}
	return out, nil
}

// Length is a synthetic length: a mean and a standard deviation in tokens.
// The zero Length means "not set".
type Length struct {
	Mean, StdDev float64
}

// ParseLength reads "MEAN" or "MEAN:STDDEV".
func ParseLength(s string) (Length, error) {
	var l Length
	m, sd, hasSD := strings.Cut(s, ":")
	if _, err := fmt.Sscanf(m, "%g", &l.Mean); err != nil || l.Mean < 1 {
		return l, fmt.Errorf("length %q: want MEAN[:STDDEV] with MEAN >= 1", s)
	}
	if hasSD {
		if _, err := fmt.Sscanf(sd, "%g", &l.StdDev); err != nil || l.StdDev < 0 {
			return l, fmt.Errorf("length %q: bad STDDEV", s)
		}
	}
	return l, nil
}

// draw returns a length from a normal distribution clipped to at least 1.
func (l Length) draw(rng *rand.Rand) int {
	v := l.Mean
	if l.StdDev > 0 {
		v += rng.NormFloat64() * l.StdDev
	}
	return max(1, int(math.Round(v)))
}

// synthWords are common short English words; most tokenizers count each as
// one token with its leading space, so a prompt of n words is about n tokens.
var synthWords = strings.Fields(`the of and to in is was for on are with as his they at be this from
have or by one had not but what all were when we there can an your which their said if do will each
about how up out them then she many some so these would other into has more her two like him see time
could no make than first been its who now people my made over did down only way find use may water long
little very after words called just where most know get through back much before go good new write our
used me man too any day same right look think also around another came come work three word must because
does part even place well such here take why things help put years different away again off went old
number great tell men say small every found still between name should home big give air line set own
under read last never us left end along while might next sound below saw something thought both few
those always looked show large often together asked house world going want school important until form
food keep children feet land side without boy once animals life enough took sometimes four head above
kind began almost live page got earth need far hand high year mother light parts country father let
night following picture being study second eyes soon times story boys since white days ever paper hard
near sentence better best across during today others however sure means knew try told young miles sun
ways thing whole hear example heard several change answer room sea against top turned learn point city
play toward five using himself usually`)

// SyntheticPrompts returns n prompts of about in.draw() tokens each, built
// from common words with a seeded generator; n <= 0 means 64.
func SyntheticPrompts(in Length, n int, seed uint64) []Prompt {
	if n <= 0 {
		n = 64
	}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	out := make([]Prompt, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		words := in.draw(rng)
		for w := range words {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(synthWords[rng.IntN(len(synthWords))])
		}
		out[i] = Prompt{Messages: []api.Message{api.TextMessage("user", b.String())}}
	}
	return out
}
