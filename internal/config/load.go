package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Built-in defaults (SPEC.md "Config file", issue 2).
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultDatabase      = "sqlite://streamgate.db"
	DefaultMaxBody       = 10 << 20 // 10 MiB
	DefaultStrategy      = "fallback"
	DefaultContextPolicy = "reject"
	DefaultKeepAlive     = 15 * time.Second
	// DefaultTotal bounds a whole request, streams included (issue 22:
	// with no bound, a stream whose upstream trickles content stayed open
	// for good). Long enough for the longest reasoning answers; "total: 0s"
	// turns it off.
	DefaultTotal = 30 * time.Minute
	// DefaultClientWrite bounds a write to a stream's client (issue 22: a
	// client reading 1 byte/s held its stream and its upstream for good).
	DefaultClientWrite = 30 * time.Second
	// DefaultRequestBody bounds reading a request body (issue 22: a client
	// dripping its body held a connection for good).
	DefaultRequestBody = 60 * time.Second
	// DefaultMaxDecodingBytes bounds the request bytes being read and
	// decoded at once (issue 22: 8 large bodies at once peaked at 2.8 GiB).
	DefaultMaxDecodingBytes = 16 << 20
)

// New returns a Config holding only the built-in defaults: listen
// 127.0.0.1:8080, database sqlite://streamgate.db, timeouts connect 5s,
// first_token 30s, idle 30s, total 30m, non_stream 10m, client_write 30s,
// request_body 60s, max_body_bytes 10 MiB (max_decoding_bytes is left to
// SetDefaults, as it follows max_body_bytes). It has no
// providers, keys or models, so it does not validate on its own.
func New() *Config {
	return &Config{
		Listen:   DefaultListen,
		Database: DefaultDatabase,
		Timeouts: Timeouts{
			Connect:     Duration(5e9),
			FirstToken:  Duration(30e9),
			Idle:        Duration(30e9),
			Total:       Duration(DefaultTotal),
			NonStream:   Duration(600e9),
			ClientWrite: Duration(DefaultClientWrite),
			RequestBody: Duration(DefaultRequestBody),
		},
		MaxBody:   DefaultMaxBody,
		KeepAlive: Duration(DefaultKeepAlive),
		Responses: Responses{StoreRetention: Duration(DefaultStoreRetention)},
	}
}

// SetDefaults fills the values left empty in c: Listen, Database, a zero
// MaxBody and MaxDecodingBytes (at least MaxBody), a zero responses.store_retention (720h), and each model's Strategy ("fallback") and ContextPolicy
// ("reject"); so "max_body_bytes: 0" means the default, not "no limit". It never changes Timeouts, because a zero
// timeout means "off"; start from New to get the default timeouts. Load
// calls it; call it on a Config built in code before Validate.
func (c *Config) SetDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.Responses.StoreRetention == 0 {
		c.Responses.StoreRetention = Duration(DefaultStoreRetention)
	}
	if c.MaxDecodingBytes == 0 {
		c.MaxDecodingBytes = max(DefaultMaxDecodingBytes, c.MaxBody)
	}
	for i := range c.Models {
		m := &c.Models[i]
		if m.Strategy == "" {
			m.Strategy = DefaultStrategy
		}
		if m.ContextPolicy == "" {
			m.ContextPolicy = DefaultContextPolicy
		}
	}
}

// Environment variables read by ApplyEnv.
const (
	EnvListen   = "STREAMGATE_LISTEN"   // overrides listen
	EnvDatabase = "STREAMGATE_DATABASE" // overrides database
	EnvDevKey   = "STREAMGATE_DEV_KEY"  // the embedded default's development key
)

// ApplyEnv overrides c with the environment: STREAMGATE_LISTEN replaces
// Listen and STREAMGATE_DATABASE replaces Database when set and non-empty.
// It returns the paths it changed ("listen", "database"). The order of
// precedence is defaults < file < environment < flags: Load and Default
// call ApplyEnv before validating, and the caller applies flags afterwards
// (cfg.Listen = addr) and calls Validate again if it changed anything.
// Calling ApplyEnv twice is harmless. A nil getenv changes nothing.
func (c *Config) ApplyEnv(getenv func(string) string) []string {
	if getenv == nil {
		return nil
	}
	var changed []string
	if v := getenv(EnvListen); v != "" {
		c.Listen = v
		changed = append(changed, "listen")
	}
	if v := getenv(EnvDatabase); v != "" {
		c.Database = v
		changed = append(changed, "database")
	}
	return changed
}

// FieldError is one problem with one configuration value. Validate returns
// FieldErrors without File and Line; Load fills them in where it can.
type FieldError struct {
	File string // file name; "" when not from a file (or set by the environment)
	Line int    // 1-based line in File; 0 when unknown
	Path string // the value's path, e.g. models[2].routes[0].provider; "" for the whole file
	Msg  string // what is wrong; never contains a secret

	// refersTo names the list ("providers", "models") whose names an
	// "unknown name" problem was checked against, so Parse can leave the
	// problem out when that list itself could not be read.
	refersTo string
}

// Error formats e as "file:line: path: msg", leaving out what is unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":")
			b.WriteString(strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads the YAML configuration file at path and returns it validated.
// See Parse for what happens to the contents.
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data, getenv)
}

// LoadWithoutSecrets is Load for a reader that needs no secret (the
// benchmark's prices): a provider api_key or a gateway key whose ${VAR} is
// unset is no problem, and such a key is filled with a placeholder unique to
// its entry, so that the rest is validated as serve would. The returned
// Config must not serve requests.
func LoadWithoutSecrets(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(path, data, getenv, false)
}

// Parse builds a validated Config from YAML data; name is the file name
// used in messages. In order:
//   - ${VAR} and ${VAR:-default} are expanded with getenv (nil: all unset);
//     ":-" uses default when VAR is unset or empty, "$${" is a literal "${",
//     a bare $VAR is left as it is; a malformed ${ is an error even in a
//     comment. Expansion happens on the parsed values,
//     not on the text, so a value with '#', ':' or quotes cannot change the
//     document's structure or line numbers; a plain (unquoted) value is
//     typed after expansion, so "retries: ${N}" with N=2 is an integer.
//   - unknown fields, values of the wrong type and durations without a
//     unit ("5" instead of "5s") are rejected, each named with its line.
//     A value rejected here is left out (its default stands) so the rest of
//     the file is still decoded and validated.
//   - the file is decoded over New's defaults, then SetDefaults, then
//     ApplyEnv, then Validate.
//   - a provider api_key that uses ${VAR} needs VAR set and non-empty, like
//     a gateway key; ${VAR:-} says the key is optional.
//
// Every problem is reported at once, in the order of their lines: the error
// is an errors.Join of *FieldError, one per line "file:line: path: message"
// (problems set by the environment, without a line, come last). Only a YAML
// syntax error stops the check early. A problem that follows from one
// already reported (a value of the wrong shape, a reference into a list that
// is not a list) is not reported again. A value that came from an unset
// variable says so. Messages never contain a secret.
func Parse(name string, data []byte, getenv func(string) string) (*Config, error) {
	return parse(name, data, getenv, true)
}

func parse(name string, data []byte, getenv func(string) string, secrets bool) (*Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	p := &parser{
		file:   name,
		getenv: getenv,
		lines:  map[string]int{"": 1},
		refs:   map[*yaml.Node][]envRef{},
		unset:  map[string][]string{},
		broken: map[string]bool{},
	}
	text := p.placehold(data)
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(text))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		p.errs = append(p.errs, p.syntaxError(err))
		return nil, p.report()
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		p.errs = append(p.errs, &FieldError{File: name, Line: extra.Line, Msg: "more than one YAML document"})
	}

	cfg := New()
	if len(root.Content) > 0 {
		doc := root.Content[0]
		p.substitute(doc, map[*yaml.Node]bool{})
		p.check(doc, reflect.TypeFor[Config](), "")
		if err := p.decode(doc, cfg); err != nil {
			p.errs = append(p.errs, err)
			return nil, p.report()
		}
	}
	cfg.SetDefaults()
	for _, path := range cfg.ApplyEnv(getenv) {
		p.fromEnv(path)
	}
	if secrets {
		p.requiredSecrets(cfg)
	} else {
		for i := range cfg.Keys {
			if k := &cfg.Keys[i]; k.Key == "" && len(p.unset[fmt.Sprintf("keys[%d].key", i)]) > 0 {
				k.Key = fmt.Sprintf("unset-secret-%d", i)
			}
		}
		for i := range cfg.Providers {
			for j := range cfg.Providers[i].APIKeys {
				if k := &cfg.Providers[i].APIKeys[j]; k.Key == "" && len(p.unset[fmt.Sprintf("providers[%d].api_keys[%d].key", i, j)]) > 0 {
					k.Key = fmt.Sprintf("unset-provider-secret-%d-%d", i, j)
				}
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		p.errs = append(p.errs, p.locate(err)...)
	}
	if len(p.errs) > 0 {
		return nil, p.report()
	}
	cfg.prepare()
	return cfg, nil
}

// report returns every problem found, sorted by line (stable, so problems
// on one line keep the order they were found in); problems without a line
// come last.
func (p *parser) report() error {
	line := func(e error) int {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Line > 0 {
			return fe.Line
		}
		return math.MaxInt
	}
	slices.SortStableFunc(p.errs, func(a, b error) int { return cmp.Compare(line(a), line(b)) })
	return errors.Join(p.errs...)
}

// requiredSecrets reports each provider api_key that used ${VAR} with VAR
// unset or empty and no default: the key is meant to be there, and an
// upstream would only answer 401 later, request after request.
func (p *parser) requiredSecrets(cfg *Config) {
	for i := range cfg.Providers {
		path := fmt.Sprintf("providers[%d].api_key", i)
		names := p.unset[path]
		if len(names) == 0 || p.isBroken(path) {
			continue
		}
		p.errs = append(p.errs, &FieldError{File: p.file, Line: p.lineOf(path), Path: path,
			Msg: fmt.Sprintf("${%s} is unset or empty (write ${%s:-} if this provider needs no key)", strings.Join(names, "}, ${"), names[0])})
	}
}

// parser carries one file's state through Parse.
type parser struct {
	file   string
	getenv func(string) string
	prefix string // placeholder prefix, absent from the original text

	vals  []envValue              // placeholder i stands for vals[i]
	refs  map[*yaml.Node][]envRef // variables substituted into a node
	lines map[string]int          // path → line
	unset map[string][]string     // path → variables that were unset there
	env   map[string]string       // path → variable that overrode it
	errs  []error

	// broken holds the paths of values dropped for a problem already
	// reported, so that Validate's complaints about them (or about
	// references into them) are not reported a second time.
	broken map[string]bool
}

type envValue struct {
	ref envRef
	val string
}

type envRef struct {
	name    string
	unset   bool // empty, and no default
	invalid bool // a malformed reference, already reported
}

// envPattern matches "$${" (an escaped "${") or a ${...} reference.
var envPattern = regexp.MustCompile(`\$\$\{|\$\{([^}\n]*)\}?`)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// placehold replaces each ${...} in data with a token made of letters and
// digits, safe in any YAML context (plain, quoted, flow), and records what
// it stands for. The values are put in after parsing (substitute). A
// malformed reference is recorded as a problem and stands for nothing: the
// value holding it is left out (see check), so the rest of the file is
// still checked.
func (p *parser) placehold(data []byte) []byte {
	p.prefix = "sgenvQ"
	for bytes.Contains(data, []byte(p.prefix)) {
		p.prefix += "Q"
	}
	var (
		out  []byte
		last int
	)
	token := func(v envValue) {
		p.vals = append(p.vals, v)
		out = fmt.Appendf(out, "%s%dZ", p.prefix, len(p.vals)-1)
	}
	for _, m := range envPattern.FindAllSubmatchIndex(data, -1) {
		out = append(out, data[last:m[0]]...)
		last = m[1]
		match := data[m[0]:m[1]]
		if string(match) == "$${" {
			out = append(out, "${"...)
			continue
		}
		line := 1 + bytes.Count(data[:m[0]], []byte("\n"))
		if match[len(match)-1] != '}' {
			p.errs = append(p.errs, &FieldError{File: p.file, Line: line, Msg: "unterminated ${ (want ${VAR} or ${VAR:-default})"})
			// Replace only the "${": the rest of the line (a closing
			// quote, say) keeps the document's structure.
			token(envValue{ref: envRef{invalid: true}})
			last = m[0] + 2
			continue
		}
		expr := string(data[m[2]:m[3]])
		name, def, hasDef := strings.Cut(expr, ":-")
		if !envName.MatchString(name) {
			p.errs = append(p.errs, &FieldError{File: p.file, Line: line, Msg: fmt.Sprintf("invalid variable reference ${%s} (want ${VAR} or ${VAR:-default})", expr)})
			token(envValue{ref: envRef{invalid: true}})
			continue
		}
		v := p.getenv(name)
		ref := envRef{name: name}
		if v == "" {
			v = def
			ref.unset = !hasDef
		}
		token(envValue{ref: ref, val: v})
	}
	return append(out, data[last:]...)
}

// substitute puts the environment values back into every scalar that holds
// a placeholder and lets plain scalars be typed again from their new text.
func (p *parser) substitute(n *yaml.Node, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	for _, c := range n.Content {
		p.substitute(c, seen)
	}
	if n.Kind != yaml.ScalarNode || len(p.vals) == 0 || !strings.Contains(n.Value, p.prefix) {
		return
	}
	var b strings.Builder
	rest := n.Value
	for {
		i := strings.Index(rest, p.prefix)
		if i < 0 {
			break
		}
		b.WriteString(rest[:i])
		after := rest[i+len(p.prefix):]
		j := strings.IndexByte(after, 'Z')
		k, err := strconv.Atoi(after[:max(j, 0)])
		if j < 0 || err != nil || k >= len(p.vals) {
			b.WriteString(p.prefix)
			rest = after
			continue
		}
		b.WriteString(p.vals[k].val)
		p.refs[n] = append(p.refs[n], p.vals[k].ref)
		rest = after[j+1:]
	}
	b.WriteString(rest)
	n.Value = b.String()
	if n.Style&(yaml.TaggedStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		n.Tag = "" // type it from the expanded text
	}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns a yaml parse error into "file:line: message".
func (p *parser) syntaxError(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		line, msg := yamlParserLine(line, m[2])
		return &FieldError{File: p.file, Line: line, Msg: msg}
	}
	return &FieldError{File: p.file, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

// problem records a problem found while checking the document's shape.
func (p *parser) problem(n *yaml.Node, path, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{File: p.file, Line: n.Line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

var durationType = reflect.TypeFor[Duration]()

// check walks the document against the Go type t, recording each value's
// line by path, and reports unknown or repeated fields and values of the
// wrong type with their path. It is what makes Parse's messages name the
// field (yaml's own errors name Go types) and lets Parse report every shape
// problem at once: a value with a problem is dropped (see drop) and a
// repeated field removed, so that the decode which follows cannot fail on
// them and the rest of the file is still decoded and validated.
func (p *parser) check(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if _, ok := p.lines[path]; !ok {
		p.lines[path] = n.Line
	}
	for _, r := range p.refs[n] {
		if r.invalid {
			p.drop(n, path) // reported by placehold
			return
		}
	}
	for _, r := range p.refs[n] {
		if r.unset {
			p.unset[path] = append(p.unset[path], r.name)
		}
	}
	if n.ShortTag() == "!!null" {
		return // null keeps the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		if _, err := parseDuration(n); err != nil {
			p.scalarProblem(n, path, "a duration with a unit such as \"5s\"", err)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			p.problem(n, path, "want a mapping of fields, got %s", kindName(n))
			p.drop(n, path)
			return
		}
		p.checkFields(n, t, path, map[string]int{})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.problem(n, path, "want a list, got %s", kindName(n))
			p.drop(n, path)
			return
		}
		for i, item := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			p.lines[ip] = item.Line
			p.check(item, t.Elem(), ip)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			p.problem(n, path, "want a mapping, got %s", kindName(n))
			p.drop(n, path)
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.check(n.Content[i+1], t.Elem(), path+"."+n.Content[i].Value)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			p.problem(n, path, "want a single value, got %s", kindName(n))
			p.drop(n, path)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			p.scalarProblem(n, path, "an integer", nil)
		}
	case reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
			p.scalarProblem(n, path, "a number", nil)
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			p.scalarProblem(n, path, "true or false", nil)
		}
	}
}

// drop replaces the value n at path, whose problem has been reported, by a
// null (so the default stands and the decode cannot fail on it) and marks
// path broken. The node is changed in place: an alias of it sees the null
// too, and its problem is not reported twice.
func (p *parser) drop(n *yaml.Node, path string) {
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
	p.broken[path] = true
}

// isBroken reports whether path is at or under a value that was dropped.
func (p *parser) isBroken(path string) bool {
	for b := range p.broken {
		if b == "" || path == b || strings.HasPrefix(path, b+".") || strings.HasPrefix(path, b+"[") {
			return true
		}
	}
	return false
}

// checkFields checks the fields of one mapping meant for struct type t;
// seen maps field names to the line where each was first set. A repeated
// field (yaml's decode refuses it) and a merge key of the wrong shape are
// removed from n after they are reported; the first setting stands.
func (p *parser) checkFields(n *yaml.Node, t reflect.Type, path string, seen map[string]int) {
	fields := yamlFields(t)
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if p.invalidRef(k) {
			continue // reported by placehold
		}
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			if p.merge(v, t, path, seen) {
				kept = append(kept, k, v)
			}
			continue
		}
		fp := k.Value
		if path != "" {
			fp = path + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			p.problem(k, fp, "set twice (first on line %d)", first)
			continue
		}
		kept = append(kept, k, v)
		seen[k.Value] = k.Line
		f, ok := fields[k.Value]
		if !ok {
			names := make([]string, 0, len(fields))
			for name := range fields {
				names = append(names, name)
			}
			slices.Sort(names)
			p.problem(k, fp, "unknown field %q (known fields: %s)", k.Value, strings.Join(names, ", "))
			continue
		}
		p.lines[fp] = k.Line
		p.check(v, f.Type, fp)
	}
	n.Content = kept
}

// invalidRef reports whether n held a malformed ${...} reference.
func (p *parser) invalidRef(n *yaml.Node) bool {
	for _, r := range p.refs[n] {
		if r.invalid {
			return true
		}
	}
	return false
}

// merge applies a YAML merge key ("<<: *base"): its mappings' fields count
// as set here unless set already. It reports false, after reporting the
// problem, when v is not a mapping or a list of mappings.
func (p *parser) merge(v *yaml.Node, t reflect.Type, path string, seen map[string]int) bool {
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.MappingNode:
		// Fields set by the mapping itself win over merged ones, so check
		// the merged fields with their own duplicate tracking.
		p.checkFields(v, t, path, map[string]int{})
		return true
	case yaml.SequenceNode:
		ok := true
		for _, item := range v.Content {
			ok = p.merge(item, t, path, seen) && ok
		}
		return ok
	default:
		p.problem(v, path, "merge key << wants a mapping, got %s", kindName(v))
		return false
	}
}

// scalarProblem reports a value of the wrong type. It quotes the value only
// when it was written in the file: a value from the environment might be a
// secret put in the wrong place, so the message names the variable instead.
func (p *parser) scalarProblem(n *yaml.Node, path, want string, detail error) {
	defer p.drop(n, path)
	if refs := p.refs[n]; len(refs) > 0 {
		p.problem(n, path, "want %s, but the value from ${%s} is not", want, refs[0].name)
		return
	}
	if detail != nil {
		p.problem(n, path, "%v", detail)
		return
	}
	if n.Kind != yaml.ScalarNode {
		p.problem(n, path, "want %s, got %s", want, kindName(n))
		return
	}
	p.problem(n, path, "want %s, got %q", want, n.Value)
}

// yamlFields maps the yaml names of t's exported fields to the fields.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	fields := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f
	}
	return fields
}

// decode decodes the checked document over cfg's defaults. check has
// already rejected unknown fields and wrong types with their paths, which
// yaml's own strict mode (Decoder.KnownFields) cannot do: it names Go
// types, stops at the first problem, and yaml.Node.Decode has no strict
// mode at all. An error here would be a gap in check.
func (p *parser) decode(doc *yaml.Node, cfg *Config) error {
	if err := doc.Decode(cfg); err != nil {
		return &FieldError{File: p.file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	return nil
}

// fromEnv records that the environment set the value at path.
func (p *parser) fromEnv(path string) {
	if p.env == nil {
		p.env = map[string]string{}
	}
	switch path {
	case "listen":
		p.env[path] = EnvListen
	case "database":
		p.env[path] = EnvDatabase
	}
}

// locate adds the file and line to each FieldError of a Validate error,
// and says when the value came from the environment. It leaves out the
// problems that follow from one the shape check reported: those of a value
// it dropped, and unknown names when the list they refer to was dropped.
func (p *parser) locate(err error) []error {
	var in []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		in = j.Unwrap()
	} else {
		in = []error{err}
	}
	out := make([]error, 0, len(in))
	for _, e := range in {
		fe, ok := e.(*FieldError)
		if !ok {
			out = append(out, fmt.Errorf("%s: %w", p.file, e))
			continue
		}
		if p.isBroken(fe.Path) || (fe.refersTo != "" && p.namesBroken(fe.refersTo)) {
			continue
		}
		c := *fe
		if v, ok := p.env[topField(c.Path)]; ok {
			c.Msg += fmt.Sprintf(" (set by %s)", v)
			out = append(out, &c)
			continue
		}
		c.File = p.file
		c.Line = p.lineOf(c.Path)
		if names := p.unset[c.Path]; len(names) > 0 {
			c.Msg += fmt.Sprintf(" (${%s} is unset or empty)", strings.Join(names, "}, ${"))
		}
		out = append(out, &c)
	}
	return out
}

// namesBroken reports whether the names of the list at path ("providers")
// are unknown because the list, an entry or an entry's name was dropped.
func (p *parser) namesBroken(list string) bool {
	for b := range p.broken {
		if b == "" || b == list {
			return true
		}
		rest, ok := strings.CutPrefix(b, list+"[")
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, ']'); i >= 0 && (rest[i+1:] == "" || rest[i+1:] == ".name") {
			return true
		}
	}
	return false
}

// lineOf returns the line of path, or of its nearest ancestor in the file.
func (p *parser) lineOf(path string) int {
	for {
		if line, ok := p.lines[path]; ok {
			return line
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return p.lines[""]
		}
		path = path[:i]
	}
}

// topField returns the first element of a path: "models" for models[1].name.
func topField(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}
