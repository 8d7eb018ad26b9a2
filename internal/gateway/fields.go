package gateway

import (
	"errors"

	"github.com/streamgate/streamgate/internal/api"
)

// The fields of each request body that the gateway acts on: it routes on
// them, clamps them, counts them for the context guard, the rate limits
// and the budget, or forces them upstream. Each must have one reading
// (STYLE lesson 18): encoding/json matches names case-insensitively and
// keeps the last duplicate, an upstream may match exactly and keep the
// first, so a body that names one of these twice, or under another case,
// is refused before it is decoded (oneReading).
var (
	chatFields = []api.Field{
		{Name: "model"},
		{Name: "stream"},
		{Name: "stream_options", Fields: []api.Field{{Name: "include_usage"}}},
		{Name: "max_tokens"},
		{Name: "max_completion_tokens"},
		{Name: "messages", Each: true, Fields: []api.Field{{Name: "role"}, {Name: "content"}}},
		{Name: "tools"},
		{Name: "prompt_cache_key"}, // affinity's session
		{Name: "user"},
	}
	messagesFields = []api.Field{
		{Name: "model"},
		{Name: "max_tokens"},
		{Name: "stream"},
		{Name: "messages", Each: true, Fields: []api.Field{{Name: "role"}, {Name: "content"}}},
		{Name: "system"},
		{Name: "thinking", Fields: []api.Field{{Name: "type"}, {Name: "budget_tokens"}}},
		{Name: "metadata", Fields: []api.Field{{Name: "user_id"}}}, // affinity's session
	}
	embeddingsFields = []api.Field{
		{Name: "model"},
		{Name: "input"},
	}
)

// oneReading refuses (400, param the field) a body in which a field of
// fields has two readings; see api.CheckFields.
func oneReading(body []byte, fields []api.Field) error {
	err := api.CheckFields(body, fields)
	if err == nil {
		return nil // the usual case, without the allocation errors.As's target costs
	}
	var fe *api.FieldError
	if errors.As(err, &fe) {
		return invalid(fe.Path, "%s", fe.Error())
	}
	return nil
}
