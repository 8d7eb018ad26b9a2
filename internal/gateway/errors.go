package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/admit"
	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/budget"
	"github.com/streamgate/streamgate/internal/fit"
	"github.com/streamgate/streamgate/internal/metrics"
	"github.com/streamgate/streamgate/internal/provider"
	"github.com/streamgate/streamgate/internal/redact"
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

// notFoundError is a 404 of a stored thing, in OpenAI's words (msg), with
// its code and param ("" for null).
type notFoundError struct{ param, code, msg string }

func (e *notFoundError) Error() string { return e.msg }

// methodError is a 405; allow is the Allow header.
type methodError struct{ allow string }

func (e *methodError) Error() string { return "method not allowed: use " + e.allow }

// httpError is an error as the client sees it.
type httpError struct {
	status     int
	body       api.ErrorResponse
	retryAfter time.Duration
	allow      string
	// final: no retry can fix it (a spent budget, a revoked, expired or
	// unknown key, a model the key may not use): sent as x-should-retry:
	// false, which the official OpenAI and Anthropic SDKs (Go, Node,
	// Python) obey before looking at the status, so they fail at once
	// instead of retrying a 429 (issue 25: a Retry-After of hours held the
	// Node SDKs silent).
	final bool
}

// headerShouldRetry is the header the official SDKs read first to decide
// whether to retry.
const headerShouldRetry = "X-Should-Retry"

// setRetryHeaders sets Retry-After, a promise that a retry then can work,
// and x-should-retry: false on a final refusal.
func (h *httpError) setRetryHeaders(set func(k, v string)) {
	if h.final {
		set(headerShouldRetry, "false")
		return
	}
	if h.retryAfter > 0 {
		set("Retry-After", api.RetryAfter(h.retryAfter))
	}
}

// statusOf is the one place that maps an error to an HTTP status and an
// OpenAI error object. Upstream statuses are mapped, not copied: a 401 from
// a provider is the gateway's misconfiguration (502), not the client's key.
// The message of the gateway's own checks is the error's; an upstream
// failure gets a fixed message that names what failed, never an address, a
// URL or a provider's words about its keys (the log has the whole error).
func statusOf(err error) httpError {
	msg := err.Error()
	e := func(status int, typ, code, param string) httpError {
		return httpError{status: status, body: api.NewError(typ, code, param, msg)}
	}
	final := func(status int, typ, code, param string) httpError {
		h := e(status, typ, code, param)
		h.final = true
		return h
	}
	upstream := func(status int, typ, code, message string) httpError {
		return httpError{status: status, body: api.NewError(typ, code, "", message)}
	}
	var (
		inv      *invalidError
		tooLarge *http.MaxBytesError
		method   *methodError
		perr     *provider.Error
		uerr     *relay.UpstreamError
		full     *admit.Full
		long     *fit.TooLong
		rle      *rateLimitError
		thr      *auth.ThrottledError
		exceeded *budget.Exceeded
		busy     *decodeBusyError
		slow     *bodyTimeoutError
		nf       *notFoundError
		keysOut  *exhaustedError
		mcpList  *mcpListError
	)
	switch {
	case errors.As(err, &long):
		return e(http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "messages")
	case errors.As(err, &nf):
		return e(http.StatusNotFound, "invalid_request_error", nf.code, nf.param)
	case errors.Is(err, errRespStore):
		return upstream(http.StatusServiceUnavailable, "server_error", "response_store_unreachable", "the stored responses cannot be read right now")
	case errors.As(err, &inv):
		return e(http.StatusBadRequest, "invalid_request_error", "invalid_request", inv.param)
	case errors.As(err, &mcpList): // hosted MCP: a server whose tools cannot be listed, as OpenAI answers it
		return httpError{status: http.StatusFailedDependency, body: api.NewError("external_connector_error", "http_error", "tools", mcpList.Error())}
	case errors.As(err, &busy):
		h := e(http.StatusServiceUnavailable, "server_error", "gateway_busy", "")
		h.retryAfter = time.Second
		return h
	case errors.As(err, &slow):
		return e(http.StatusRequestTimeout, "invalid_request_error", "request_body_timeout", "")
	case errors.As(err, &tooLarge):
		return httpError{status: http.StatusRequestEntityTooLarge, body: api.NewError("invalid_request_error", "request_too_large", "",
			fmt.Sprintf("request body too large: the limit is %d bytes", tooLarge.Limit))}
	case errors.As(err, &method):
		h := e(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "")
		h.allow = method.allow
		return h
	case errors.Is(err, auth.ErrKeyStore):
		return upstream(http.StatusServiceUnavailable, "server_error", "key_store_unreachable", "the gateway cannot check API keys right now (its key store is unreachable)")
	case errors.Is(err, auth.ErrMissingKey), errors.Is(err, auth.ErrUnknownKey), errors.Is(err, auth.ErrNotBearer),
		errors.Is(err, auth.ErrRevokedKey), errors.Is(err, auth.ErrExpiredKey):
		return final(http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
	case errors.As(err, &thr):
		h := e(http.StatusTooManyRequests, "rate_limit_error", "too_many_wrong_admin_keys", "")
		h.retryAfter = thr.RetryAfter
		return h
	case errors.Is(err, auth.ErrAdminKey):
		return e(http.StatusUnauthorized, "authentication_error", "invalid_admin_key", "")
	case errors.Is(err, auth.ErrAdminOff):
		return e(http.StatusNotFound, "invalid_request_error", "admin_api_off", "")
	case errors.Is(err, errModelNotAllowed):
		return final(http.StatusForbidden, "permission_error", "model_not_allowed", "model")
	case errors.Is(err, errRebinding):
		return final(http.StatusForbidden, "permission_error", "host_not_allowed", "")
	case errors.Is(err, errUnknownModel):
		return final(http.StatusNotFound, "invalid_request_error", "model_not_found", "model")
	case errors.Is(err, errKeyNotFound):
		return e(http.StatusNotFound, "invalid_request_error", "key_not_found", "")
	case errors.Is(err, errTeamNotFound):
		return e(http.StatusNotFound, "invalid_request_error", "team_not_found", "")
	case errors.Is(err, errTeamConflict):
		return e(http.StatusConflict, "invalid_request_error", "team_conflict", "")
	case errors.Is(err, errKeysOff):
		return e(http.StatusNotFound, "invalid_request_error", "key_store_off", "")
	case errors.Is(err, errUsageOff):
		return e(http.StatusNotFound, "invalid_request_error", "usage_ledger_off", "")
	case errors.Is(err, errLedger):
		return upstream(http.StatusServiceUnavailable, "server_error", "usage_ledger_unreachable", "the usage ledger cannot be read right now")
	case errors.Is(err, errUnknownPath):
		return e(http.StatusNotFound, "invalid_request_error", "unknown_url", "")
	case errors.As(err, &keysOut):
		if keysOut.last.RetryAt.IsZero() {
			return e(http.StatusServiceUnavailable, "server_error", "provider_keys_disabled", "")
		}
		h := e(http.StatusTooManyRequests, "rate_limit_error", "provider_keys_exhausted", "")
		h.retryAfter = keysOut.last.RetryAfter(time.Now())
		return h
	case errors.Is(err, errNoRoute):
		h := e(http.StatusServiceUnavailable, "server_error", "no_healthy_route", "")
		var un *unavailableError
		if errors.As(err, &un) {
			h.retryAfter = un.retryAfter
		}
		return h
	case errors.As(err, &exceeded):
		// No Retry-After: the period may reset in hours (the message says
		// when), and an SDK that honours it would hang until then; a 429
		// is retried by default, so x-should-retry: false.
		return final(http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota", "")
	case errors.Is(err, errUnknownTeam):
		return final(http.StatusForbidden, "permission_error", "team_not_found", "")
	case errors.As(err, new(*teamFullError)):
		h := e(http.StatusTooManyRequests, "rate_limit_error", "too_many_concurrent_requests", "")
		var tf *teamFullError
		errors.As(err, &tf)
		h.retryAfter = tf.full.RetryAfter
		return h
	case errors.As(err, &rle):
		h := e(http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "")
		h.retryAfter = rle.retryAfter
		return h
	case errors.As(err, &full):
		status, code := http.StatusTooManyRequests, "too_many_concurrent_requests"
		if full.Scope != "key" {
			status, code = http.StatusServiceUnavailable, "gateway_busy"
		}
		h := e(status, "rate_limit_error", code, "")
		h.retryAfter = full.RetryAfter
		return h
	case errors.Is(err, errShutdown):
		return e(http.StatusServiceUnavailable, "server_error", "shutting_down", "")
	case errors.Is(err, context.Canceled), errors.Is(err, relay.ErrClientGone):
		return e(StatusClientClosed, "client_closed_request", "client_closed_request", "")
	case errors.Is(err, provider.ErrFirstTokenTimeout):
		return upstream(http.StatusGatewayTimeout, "timeout_error", "first_token_timeout", "the upstream sent no first token within timeouts.first_token")
	case errors.Is(err, provider.ErrIdleTimeout):
		return upstream(http.StatusGatewayTimeout, "timeout_error", "idle_timeout", "the upstream sent no content within timeouts.idle")
	case errors.Is(err, provider.ErrTotalTimeout):
		return upstream(http.StatusGatewayTimeout, "timeout_error", "total_timeout", "the request ran past timeouts.total")
	case errors.Is(err, provider.ErrResponseTimeout):
		return upstream(http.StatusGatewayTimeout, "timeout_error", "response_timeout", "the upstream did not answer within timeouts.non_stream")
	case errors.As(err, &perr) && errors.Is(err, provider.ErrUntranslatable):
		// Nothing reached the upstream: the route's adapter could not
		// express the request; its message names the field.
		// No retry makes a route take it (x-should-retry: false): the
		// client must change the field named.
		return httpError{status: http.StatusBadRequest, body: api.NewError("invalid_request_error", "unsupported_by_route", "",
			"the request cannot be sent to this model's provider: "+redact.Text(perr.Message)), final: true}
	case errors.As(err, &perr) && errors.Is(err, provider.ErrNotStream):
		// A 200 whose body is the upstream's error (overloaded, a proxy's
		// HTML page): what it said, redacted, rather than "truncated".
		return upstream(http.StatusBadGateway, "upstream_error", "upstream_not_stream",
			"the upstream answered "+strconv.Itoa(perr.Status)+" without an event stream: "+redact.Text(perr.Message))
	case errors.As(err, &perr) && perr.Status != 0:
		return upstreamStatusError(perr)
	case errors.Is(err, provider.ErrConnect):
		return upstream(http.StatusBadGateway, "upstream_error", "upstream_connect_failed", "could not connect to the upstream")
	case errors.Is(err, provider.ErrTruncated):
		return upstream(http.StatusBadGateway, "upstream_error", "stream_truncated", "the upstream's stream ended before it was complete")
	case errors.Is(err, provider.ErrMalformed):
		return upstream(http.StatusBadGateway, "upstream_error", "malformed_upstream_event", "the upstream sent a malformed event")
	case errors.As(err, &uerr):
		return upstream(http.StatusBadGateway, "upstream_error", "upstream_failed", "the upstream sent an error event")
	case errors.As(err, &perr):
		return upstream(http.StatusBadGateway, "upstream_error", "upstream_failed", "the upstream request failed")
	}
	return upstream(http.StatusInternalServerError, "server_error", "internal_error", "internal error")
}

// upstreamStatusError answers an upstream's error status. A 4xx that is the
// request's own fault (400, 413, 422) carries the upstream's message, which
// the client needs to fix its request, with addresses and URLs removed; any
// other status is summarised.
func upstreamStatusError(perr *provider.Error) httpError {
	status := upstreamStatus(perr.Status)
	var msg string
	switch s := perr.Status; {
	case status == s && s >= 400 && s < 500 && s != http.StatusTooManyRequests:
		msg = "the upstream rejected the request: " + redact.Text(perr.Message)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		msg = fmt.Sprintf("the upstream refused the gateway's credentials (%d)", s)
	case s == http.StatusNotFound:
		msg = "the upstream does not serve this model (404)"
	case s == http.StatusTooManyRequests:
		msg = "the upstream is rate limiting (429)"
	default:
		msg = fmt.Sprintf("the upstream failed (%d)", s)
	}
	code := redact.Text(perr.Code)
	if s := perr.Status; s == http.StatusUnauthorized || s == http.StatusForbidden {
		// The provider's code ("invalid_api_key") would read as the
		// client's own key being wrong.
		code = "upstream_auth_failed"
	}
	h := httpError{status: status, body: api.NewError("upstream_error", code, "", msg)}
	if perr.Status == http.StatusTooManyRequests {
		h.body.Error.Type = "rate_limit_error"
		h.retryAfter = perr.RetryAfter
	}
	if h.body.Error.Code == nil {
		code := "upstream_" + strconv.Itoa(perr.Status)
		h.body.Error.Code = &code
	}
	return h
}

// upstreamStatus maps an upstream's HTTP status to the gateway's.
func upstreamStatus(s int) int {
	switch {
	case s == http.StatusTooManyRequests, s == http.StatusServiceUnavailable, s == http.StatusGatewayTimeout:
		return s
	case s == http.StatusRequestTimeout:
		return http.StatusGatewayTimeout // the upstream timed out, not the client
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
	case isAdmission(err):
		return usage.OutcomeRejected
	case status == http.StatusBadRequest && errors.Is(err, provider.ErrUntranslatable):
		return usage.OutcomeUntranslatable
	case errors.Is(err, provider.ErrFirstTokenTimeout), errors.Is(err, provider.ErrIdleTimeout),
		errors.Is(err, provider.ErrTotalTimeout), errors.Is(err, provider.ErrResponseTimeout), errors.Is(err, errShutdown):
		return usage.OutcomeTimeout
	case status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden ||
		status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusRequestTimeout:
		var perr *provider.Error
		if errors.As(err, &perr) {
			return usage.OutcomeUpstreamError // a 4xx the upstream gave
		}
		return usage.OutcomeRejected
	}
	return usage.OutcomeUpstreamError
}

// requestOutcome is the outcome label of streamgate_requests_total, which
// tells apart what the status code cannot: a stream that got 200 and then
// ended with an error event.
func requestOutcome(err error, status int) string {
	switch {
	case err == nil:
		return metrics.OutcomeOK
	case status == StatusClientClosed:
		return metrics.OutcomeClientGone
	case isAdmission(err):
		return metrics.OutcomeRejected
	case status == http.StatusBadRequest && errors.Is(err, provider.ErrUntranslatable):
		return metrics.OutcomeUntranslatable
	case status == http.StatusOK:
		return metrics.OutcomeErrorEvent
	case status == http.StatusGatewayTimeout:
		return metrics.OutcomeTimeout
	}
	var perr *provider.Error
	var uerr *relay.UpstreamError
	if status < 500 && !errors.As(err, &perr) {
		return metrics.OutcomeRejected
	}
	if errors.As(err, &perr) || errors.As(err, &uerr) || status == http.StatusBadGateway {
		return metrics.OutcomeUpstreamError
	}
	return metrics.OutcomeError
}

// fallbackReason is the label of streamgate_fallbacks_total for err (one
// of metrics.FallbackReasons), or ""
// when err must not move the request to another route: the client left, the
// total timeout or the shutdown fired, or the upstream refused the request
// itself (a 4xx other than 429).
func fallbackReason(err error) string {
	var perr *provider.Error
	var uerr *relay.UpstreamError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, relay.ErrClientGone),
		errors.Is(err, provider.ErrTotalTimeout), errors.Is(err, provider.ErrResponseTimeout),
		errors.Is(err, errShutdown):
		return ""
	case errors.Is(err, provider.ErrFirstTokenTimeout):
		return metrics.ReasonFirstTokenTimeout
	case errors.Is(err, provider.ErrIdleTimeout):
		return metrics.ReasonIdleTimeout
	case errors.Is(err, provider.ErrConnect):
		return metrics.ReasonConnect
	case errors.As(err, &perr):
		switch {
		case !perr.Retryable:
			return ""
		case errors.Is(err, provider.ErrUntranslatable):
			return metrics.ReasonUntranslatable
		case perr.Status == http.StatusTooManyRequests:
			return metrics.ReasonRateLimited
		case perr.Status == http.StatusUnauthorized, perr.Status == http.StatusForbidden:
			return metrics.ReasonUpstreamAuth
		case perr.Status == http.StatusNotFound:
			return metrics.ReasonUpstreamNotFound
		case perr.Status >= 500:
			return metrics.ReasonStatus5xx
		}
		return metrics.ReasonUpstreamError
	case errors.Is(err, provider.ErrTruncated):
		return metrics.ReasonTruncated
	case errors.Is(err, provider.ErrMalformed):
		return metrics.ReasonMalformed
	case errors.As(err, &uerr):
		return metrics.ReasonErrorEvent
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
	h.setRetryHeaders(w.Header().Set)
	body := errorJSON(h.body)
	if enc := infoFrom(r.Context()).enc; enc != nil {
		body = enc.ErrorBody(h.status, body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(h.status)
	w.Write(body)
}

// unknownModel is the error of a model the config lacks or the key may not use.
func unknownModel(name string) error {
	return fmt.Errorf("%w: %q (GET /v1/models lists the models of your key)", errUnknownModel, name)
}

// isAdmission reports an admission control or rate limit refusal.
func isAdmission(err error) bool {
	var full *admit.Full
	var rle *rateLimitError
	var ex *budget.Exceeded
	var busy *decodeBusyError
	return errors.As(err, &full) || errors.As(err, new(*teamFullError)) || errors.As(err, &rle) || errors.As(err, &ex) || errors.As(err, &busy)
}
