package responses

import (
	"strconv"
	"time"
)

// Warmup returns the events that answer a warm-up (WebSocket mode's
// response.create with generate: false, which calls no model): the
// response m describes created, then completed with no output and zero
// usage, sequence_number 0 and 1. The response's id is what the client
// continues from with previous_response_id (Codex chains its first turn
// from it).
func Warmup(m *Meta) [][]byte {
	events := make([][]byte, 0, 2)
	for i, f := range []final{{status: "in_progress"}, {status: "completed", usage: &usage{}, done: time.Now().Unix()}} {
		name := evCreated
		if i == 1 {
			name = evCompleted
		}
		b := append([]byte(`{"type":"`), name...)
		b = append(b, `","sequence_number":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"response":`...)
		b = m.appendResponse(b, nil, &f, nil)
		events = append(events, append(b, '}'))
	}
	return events
}
