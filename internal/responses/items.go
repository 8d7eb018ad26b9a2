package responses

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Items normalises a request's "input" into the input items a stored
// response keeps (and GET …/input_items lists): a string is one user
// message; each item gets an "id" when it has none (by its type: msg_,
// fc_, fco_, ctc_, ctco_, rs_, item_), a message without "type" its type,
// and a message's string content one text part (input_text, output_text
// for an assistant's). Other members are kept as received. An
// item_reference is replaced by the item resolve returns for its id
// (nil resolve: an error naming it); resolve's error is returned as it
// is. Errors other than resolve's are *Error naming the item.
func Items(raw json.RawMessage, resolve func(id string) (json.RawMessage, error)) ([]json.RawMessage, error) {
	if !isSet(raw) {
		return []json.RawMessage{}, nil
	}
	var s string
	if isString(raw) && json.Unmarshal(raw, &s) == nil {
		content, _ := json.Marshal([]textPart{{Type: "input_text", Text: s}})
		item, _ := json.Marshal(map[string]json.RawMessage{"id": jsonString(newItemID("msg_")), "type": json.RawMessage(`"message"`),
			"role": json.RawMessage(`"user"`), "content": content})
		return []json.RawMessage{item}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, errorf("input", "input must be a string or an array of input items")
	}
	out := make([]json.RawMessage, 0, len(raws))
	for i, r := range raws {
		path := fmt.Sprintf("input[%d]", i)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil || m == nil {
			return nil, errorf(path, "%s must be an input item object", path)
		}
		var h itemHead
		json.Unmarshal(m["type"], &h.Type)
		json.Unmarshal(m["role"], &h.Role)
		json.Unmarshal(m["id"], &h.ID)
		typ, role, id := h.kind(), h.Role, h.ID
		if h.Type == "" && typ == "message" {
			m["type"] = json.RawMessage(`"message"`)
		}
		if typ == "item_reference" {
			if id == "" {
				return nil, errorf(path+".id", "missing required field: %s.id", path)
			}
			if resolve == nil {
				return nil, errorf(path+".type", "input item type \"item_reference\" is not supported by this gateway: it has no database to store items in; send the item itself")
			}
			item, err := resolve(id)
			if err != nil {
				return nil, err
			}
			out = append(out, item)
			continue
		}
		if typ == "message" && isString(m["content"]) {
			var text string
			if json.Unmarshal(m["content"], &text) == nil {
				pt := "input_text"
				if role == "assistant" {
					pt = "output_text"
				}
				m["content"], _ = json.Marshal([]textPart{{Type: pt, Text: text}})
			}
		}
		if id == "" {
			m["id"] = jsonString(newItemID(itemPrefix(typ)))
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, errorf(path, "%s cannot be stored: %v", path, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// itemHead is the members that tell an input item's type.
type itemHead struct {
	Type string `json:"type"`
	Role string `json:"role"`
	ID   string `json:"id"`
}

// kind is the item's type: its type, else a message when it has a role,
// else an item_reference when it has an id (type is optional on both).
func (h *itemHead) kind() string {
	switch {
	case h.Type != "":
		return h.Type
	case h.Role != "":
		return "message"
	case h.ID != "":
		return "item_reference"
	}
	return ""
}

// HasReference reports whether the input raw holds an item_reference
// item (which Items resolves).
func HasReference(raw json.RawMessage) bool {
	if !isSet(raw) || isString(raw) {
		return false
	}
	var heads []itemHead
	if json.Unmarshal(raw, &heads) != nil {
		return false // Parse says what is wrong
	}
	for i := range heads {
		if heads[i].kind() == "item_reference" {
			return true
		}
	}
	return false
}

// itemPrefix is the id prefix of an input item of type typ.
func itemPrefix(typ string) string {
	switch typ {
	case "message":
		return "msg_"
	case "function_call":
		return "fc_"
	case "function_call_output":
		return "fco_"
	case "custom_tool_call":
		return "ctc_"
	case "custom_tool_call_output":
		return "ctco_"
	case "reasoning":
		return "rs_"
	}
	return "item_"
}

func newItemID(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
