package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/relay"
	"github.com/streamgate/streamgate/internal/usage"
)

// StatusClientClosed is logged (never sent) when the client went away.
const StatusClientClosed = 499

// Errors of the gateway's own checks; statusOf maps them.
var (
	errUnknownPath     = errors.New("unknown path")
	errUnknownModel    = errors.New("model not found")
	errModelNotAllowed = errors.New("model not allowed for this key")
	errNoRoute         = errors.New("no healthy route")
)

// invalidError is a 400: a request that cannot be served as sent. Param
// names the offending field, when there is one.
type invalidError struct {
	param string
	msg   string
}

func (e *invalidError) Error() string { return e.msg }

func invalid(param, format string, a ...any) error {
	return &invalidError{param: param, msg: fmt.Sprintf(format, a...)}
}

// methodError is a 405; allow is the Allow header.
type methodError struct{ allow string }

func (e *methodError) Error() string { return "method not allowed: use " + e.allow }

// httpError is an error as the client sees it.
type httpError struct {
	status     int
	body       api.ErrorResponse
	retryAfter time.Duration
	allow      string
}

// statusOf is the one place that maps an error to an HTTP status and an
// OpenAI error object. Upstream statuses are mapped, not copied: a 401 from
// a provider is the gateway's misconfiguration (502), not the client's key.
func statusOf(err error) httpError {
	msg := err.Error()
	e := func(status int, typ, code, param string) httpError {
		return httpError{status: status, body: api.NewError(typ, code, param, msg)}
	}
	var (
		inv      *invalidError
		tooLarge *http.MaxBytesError
		method   *methodError
		perr     *provider.Error
		uerr     *relay.UpstreamError
	)
	switch {
	case errors.As(err, &inv):
		return e(http.StatusBadRequest, "invalid_request_error", "invalid_request", inv.param)
	case errors.As(err, &tooLarge):
		return httpError{status: http.StatusRequestEntityTooLarge, body: api.NewError("invalid_request_error", "request_too_large", "",
			fmt.Sprintf("request body too large: the limit is %d bytes", tooLarge.Limit))}
	case errors.As(err, &method):
		h := e(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "")
		h.allow = method.allow
		return h
	case errors.Is(err, auth.ErrMissingKey), errors.Is(err, auth.ErrUnknownKey):
		return e(http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
	case errors.Is(err, errModelNotAllowed):
		return e(http.StatusForbidden, "permission_error", "model_not_allowed", "model")
	case errors.Is(err, errUnknownModel):
		return e(http.StatusNotFound, "invalid_request_error", "model_not_found", "model")
	case errors.Is(err, errUnknownPath):
		return e(http.StatusNotFound, "invalid_request_error", "unknown_url", "")
	case errors.Is(err, errNoRoute):
		return e(http.StatusServiceUnavailable, "server_error", "no_healthy_route", "")
	case errors.Is(err, errShutdown):
		return e(http.StatusServiceUnavailable, "server_error", "shutting_down", "")
	case errors.Is(err, context.Canceled), errors.Is(err, relay.ErrClientGone):
		return e(StatusClientClosed, "client_closed_request", "client_closed_request", "")
	case errors.Is(err, provider.ErrFirstTokenTimeout):
		return e(http.StatusGatewayTimeout, "timeout_error", "first_token_timeout", "")
	case errors.Is(err, provider.ErrIdleTimeout):
		return e(http.StatusGatewayTimeout, "timeout_error", "idle_timeout", "")
	case errors.Is(err, provider.ErrTotalTimeout):
		return e(http.StatusGatewayTimeout, "timeout_error", "total_timeout", "")
	case errors.As(err, &perr) && perr.Status != 0:
		h := e(upstreamStatus(perr.Status), "upstream_error", perr.Code, "")
		if perr.Status == http.StatusTooManyRequests {
			h.body.Error.Type = "rate_limit_error"
			h.retryAfter = perr.RetryAfter
		}
		if h.body.Error.Code == nil {
			code := "upstream_" + strconv.Itoa(perr.Status)
			h.body.Error.Code = &code
		}
		return h
	case errors.Is(err, provider.ErrConnect):
		return e(http.StatusBadGateway, "upstream_error", "upstream_connect_failed", "")
	case errors.Is(err, provider.ErrTruncated):
		return e(http.StatusBadGateway, "upstream_error", "stream_truncated", "")
	case errors.Is(err, provider.ErrMalformed):
		return e(http.StatusBadGateway, "upstream_error", "malformed_upstream_event", "")
	case errors.As(err, &uerr), errors.As(err, &perr):
		return e(http.StatusBadGateway, "upstream_error", "upstream_failed", "")
	}
	return e(http.StatusInternalServerError, "server_error", "internal_error", "")
}

// upstreamStatus maps an upstream's HTTP status to the gateway's.
func upstreamStatus(s int) int {
	switch {
	case s == http.StatusTooManyRequests, s == http.StatusServiceUnavailable, s == http.StatusGatewayTimeout:
		return s
	case s == http.StatusUnauthorized, s == http.StatusForbidden, s == http.StatusNotFound, s >= 500:
		return http.StatusBadGateway // the gateway's credentials or routes, or the upstream, failed
	case s >= 400:
		return s // the request itself (too long a prompt, a bad parameter)
	}
	return http.StatusBadGateway
}

// outcomeOf is the ledger outcome of a request that ended with err (nil: ok).
func outcomeOf(err error, status int) string {
	switch {
	case err == nil:
		return usage.OutcomeOK
	case status == StatusClientClosed:
		return usage.OutcomeClientCancelled
	case errors.Is(err, provider.ErrFirstTokenTimeout), errors.Is(err, provider.ErrIdleTimeout),
		errors.Is(err, provider.ErrTotalTimeout), errors.Is(err, errShutdown):
		return usage.OutcomeTimeout
	case status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden ||
		status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusRequestEntityTooLarge:
		var perr *provider.Error
		if errors.As(err, &perr) {
			return usage.OutcomeUpstreamError // a 4xx the upstream gave
		}
		return usage.OutcomeRejected
	}
	return usage.OutcomeUpstreamError
}

// fallbackReason is the label of streamgate_fallbacks_total for err, or ""
// when err must not move the request to another route: the client left, the
// total timeout or the shutdown fired, or the upstream refused the request
// itself (a 4xx other than 429).
func fallbackReason(err error) string {
	var perr *provider.Error
	var uerr *relay.UpstreamError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, relay.ErrClientGone),
		errors.Is(err, provider.ErrTotalTimeout), errors.Is(err, errShutdown):
		return ""
	case errors.Is(err, provider.ErrFirstTokenTimeout):
		return "first_token_timeout"
	case errors.Is(err, provider.ErrIdleTimeout):
		return "idle_timeout"
	case errors.Is(err, provider.ErrConnect):
		return "connect"
	case errors.As(err, &perr):
		switch {
		case !perr.Retryable:
			return ""
		case perr.Status == http.StatusTooManyRequests:
			return "rate_limited"
		case perr.Status >= 500:
			return "status_5xx"
		}
		return "upstream_error"
	case errors.Is(err, provider.ErrTruncated):
		return "truncated"
	case errors.Is(err, provider.ErrMalformed):
		return "malformed"
	case errors.As(err, &uerr):
		return "error_event"
	}
	return ""
}

// errorJSON encodes the OpenAI error object.
func errorJSON(body api.ErrorResponse) []byte {
	b, err := json.Marshal(body)
	if err != nil { // cannot happen with strings only
		return []byte(`{"error":{"message":"internal error","type":"server_error","code":null,"param":null}}`)
	}
	return b
}

// writeError answers a request that failed before any response was written.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	h := statusOf(err)
	if h.allow != "" {
		w.Header().Set("Allow", h.allow)
	}
	setRetryAfter(w.Header(), h.retryAfter)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(h.status)
	w.Write(errorJSON(h.body))
}

func setRetryAfter(h http.Header, d time.Duration) {
	if d > 0 {
		h.Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	}
}
