package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/streamgate/streamgate/internal/mcp/jsonrpc"
	"github.com/streamgate/streamgate/internal/sse"
)

// legacyDialer opens a legacy HTTP+SSE (2024-11-05) link: a GET stream
// whose first event names the endpoint that takes the client's POSTs, and
// that carries every message of the server.
func legacyDialer(h *httpServer) dialer {
	return dialer{kind: "stream", dial: func(ctx context.Context, gen int64, deliver func(*jsonrpc.Message), gone func(error)) (link, error) {
		sctx, cancel := context.WithCancel(ctx)
		req := h.newRequest(sctx, http.MethodGet, h.url, nil, nil)
		resp, err := h.client.Do(req)
		if err != nil {
			cancel()
			return nil, h.errorf("legacy SSE stream: %w", err)
		}
		if resp.StatusCode/100 != 2 || mediaType(resp) != "text/event-stream" {
			cancel()
			if resp.StatusCode/100 != 2 {
				return nil, h.errorf("legacy SSE stream: %w", h.refusal(resp))
			}
			resp.Body.Close()
			return nil, h.errorf("legacy SSE stream: Content-Type %q, want text/event-stream", mediaType(resp))
		}
		r := sse.NewReader(resp.Body, h.max)
		r.NoDone = true
		// The endpoint event comes first; a server that sends none within
		// the handshake's time is not a legacy MCP server.
		t := time.AfterFunc(handshakeTimeout, cancel)
		var endpoint *url.URL
		for endpoint == nil {
			ev, err := r.Next()
			if err != nil {
				t.Stop()
				cancel()
				resp.Body.Close()
				return nil, h.errorf("legacy SSE stream: no endpoint event: %v", err)
			}
			if string(ev.Name) == "endpoint" {
				if endpoint, err = h.sameOrigin(string(ev.Data)); err != nil {
					t.Stop()
					cancel()
					resp.Body.Close()
					return nil, err
				}
			}
		}
		t.Stop()
		l := &legacyLink{h: h, endpoint: endpoint, cancel: cancel, done: make(chan struct{})}
		h.wg.Go(func() {
			defer close(l.done)
			defer resp.Body.Close()
			for {
				ev, err := r.Next()
				if err != nil {
					var long *sse.LineTooLongError
					switch {
					case err == io.EOF:
						err = errors.New("the server closed the stream")
					case errors.As(err, &long):
						// The stream cannot go on past an event it did not
						// read: the calls on it fail with ErrTooLarge, and
						// the stream is opened again.
						err = h.tooLarge("an event")
					}
					gone(err)
					return
				}
				if len(ev.Data) == 0 || (len(ev.Name) > 0 && string(ev.Name) != "message") {
					continue
				}
				msgs, _, err := jsonrpc.Decode([]byte(string(ev.Data)), h.limits())
				if err != nil {
					h.log.Warn("mcp upstream: an event that is not a message", "err", err)
					continue
				}
				for i := range msgs {
					deliver(&msgs[i])
				}
			}
		})
		return l, nil
	}}
}

// sameOrigin resolves a legacy endpoint against the configured URL; it must
// stay on the same scheme and host, where the configured headers belong.
func (h *httpServer) sameOrigin(ref string) (*url.URL, error) {
	u, err := h.url.Parse(ref)
	if err != nil || u.Scheme != h.url.Scheme || u.Host != h.url.Host {
		return nil, h.errorf("legacy endpoint %q is not on the configured server's origin", clipString(ref, 100))
	}
	return u, nil
}

// legacyLink is one legacy stream and its POST endpoint.
type legacyLink struct {
	h        *httpServer
	endpoint *url.URL
	cancel   context.CancelFunc
	done     chan struct{}
	once     sync.Once
}

func (l *legacyLink) send(ctx context.Context, msg []byte) error {
	return l.sendTo(ctx, l.endpoint.RequestURI(), msg)
}

// sendTo POSTs a message to an endpoint (path and query), which a ReplyTo
// made on another replica may name.
func (l *legacyLink) sendTo(ctx context.Context, endpoint string, msg []byte) error {
	u, err := l.h.sameOrigin(endpoint)
	if err != nil {
		return err
	}
	resp, err := l.h.client.Do(l.h.newRequest(ctx, http.MethodPost, u, nil, msg))
	if err != nil {
		return l.h.errorf("legacy POST: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return l.h.errorf("legacy POST: %w", l.h.refusal(resp))
	}
	drain(resp.Body, func() {})
	return nil
}

func (l *legacyLink) replyTo(r *replyTo) {
	r.Kind, r.Endpoint, r.Instance = "l", l.endpoint.RequestURI(), ""
}

func (l *legacyLink) close() {
	l.once.Do(l.cancel)
	<-l.done
}
