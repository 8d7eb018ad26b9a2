package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ParamError is a request the gateway refuses or cannot translate, with
// the request parameter it stands at (a JSON path such as
// "messages[0].content[1]"): the dialect packages' Error (messages.Error,
// responses.Error), which the gateway answers as a 400 naming Param.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Msg }

// ParamErrorf is a *ParamError at param with a formatted message.
func ParamErrorf(param, format string, a ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, a...)}
}

// ReadTyped decodes raw, a JSON object whose "type" member is one of
// known, as a T, a value of what the request calls noun ("content block",
// "content part") at path; else a *ParamError. An object of another type
// is refused naming that type, read first, so that an element of a type
// the gateway does not take is named by its type rather than by a member
// of another shape (Anthropic's content blocks, the Responses API's
// content parts).
func ReadTyped[T any](raw json.RawMessage, path, noun string, known ...string) (T, error) {
	var v T
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return v, ParamErrorf(path, "%s must be a %s object", path, noun)
	}
	if !slices.Contains(known, head.Type) {
		return v, ParamErrorf(path+".type", "%s type %q is not supported by the gateway here (supported: %s)", noun, head.Type, strings.Join(known, ", "))
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		kind := noun[strings.LastIndexByte(noun, ' ')+1:] // "block", "part"
		return v, ParamErrorf(path, "%s is not a valid %s %s: %v", path, head.Type, kind, err)
	}
	return v, nil
}
