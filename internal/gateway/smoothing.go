package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/streamgate/streamgate/internal/config"
)

// HeaderSmoothing turns stream smoothing on for one request ("50ms": the
// longest a word is held) or off ("off"), whatever the model's smoothing
// block says. Streams only: a non-streaming request ignores it.
const HeaderSmoothing = "X-Streamgate-Smoothing"

// smoothingOf sets c.smoothing for a stream: the request's
// X-Streamgate-Smoothing header, else the model's smoothing.max_delay, else
// off. A header that is neither "off" nor a duration in (0, 1s] is refused
// with 400 naming it, before the request counts against a rate limit,
// budget or admission slot; false then. Out of line: admit's frame stays
// lean.
//
//go:noinline
func (g *Gateway) smoothingOf(w http.ResponseWriter, r *http.Request, c *call) bool {
	if s := c.model.Smoothing; s != nil {
		c.smoothing = s.MaxDelay.D()
	}
	v := strings.TrimSpace(r.Header.Get(HeaderSmoothing))
	if v == "" {
		return true
	}
	if strings.EqualFold(v, "off") {
		c.smoothing = 0
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > config.MaxSmoothingDelay {
		g.reject(w, r, c, invalid("", "invalid %s header %q: want \"off\" or a duration above 0s and at most %v, such as 50ms",
			HeaderSmoothing, v, config.MaxSmoothingDelay))
		return false
	}
	c.smoothing = d
	return true
}
