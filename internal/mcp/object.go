package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// object is a JSON object read member by member, in order, with its
// values raw: the handler rewrites a member or two (a tool's name, a
// progress token) and passes the rest, unknown members included, as it
// came.
type object []member

type member struct {
	Key string
	Val json.RawMessage
}

// readKeys are the members the handler acts on: an object where one of
// them appears twice, or under another case, is refused (STYLE 18: Go's
// decoder matches keys case-insensitively and keeps the last duplicate,
// a server may read the first).
var readKeys = []string{"name", "uri", "arguments", "_meta", "cursor", "ref", "progressToken", "uriTemplate",
	"io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities", "notifications"}

// parseObject reads raw, which must be a JSON object (or absent: empty).
func parseObject(raw json.RawMessage) (object, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var o object
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		for _, m := range o {
			if m.Key == k {
				return nil, fmt.Errorf("member %q appears twice", k)
			}
			if strings.EqualFold(m.Key, k) && isReadKey(k) {
				return nil, fmt.Errorf("members %q and %q differ only in case", m.Key, k)
			}
		}
		o = append(o, member{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

func isReadKey(k string) bool {
	for _, r := range readKeys {
		if strings.EqualFold(r, k) {
			return true
		}
	}
	return false
}

// get returns the member k's raw value, nil when absent.
func (o object) get(k string) json.RawMessage {
	for _, m := range o {
		if m.Key == k {
			return m.Val
		}
	}
	return nil
}

// str returns the member k as a string, "" when absent or not a string.
func (o object) str(k string) string {
	var s string
	if v := o.get(k); v != nil && json.Unmarshal(v, &s) == nil {
		return s
	}
	return ""
}

// set replaces k's value, or appends k.
func (o *object) set(k string, v json.RawMessage) {
	for i := range *o {
		if (*o)[i].Key == k {
			(*o)[i].Val = v
			return
		}
	}
	*o = append(*o, member{k, v})
}

// setString sets k to the JSON string s.
func (o *object) setString(k, s string) {
	b, _ := json.Marshal(s)
	o.set(k, b)
}

// del removes k.
func (o *object) del(k string) {
	for i := range *o {
		if (*o)[i].Key == k {
			*o = append((*o)[:i], (*o)[i+1:]...)
			return
		}
	}
}

// MarshalJSON writes the members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.Val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// raw is o encoded.
func (o object) raw() json.RawMessage {
	b, _ := o.MarshalJSON()
	return b
}
