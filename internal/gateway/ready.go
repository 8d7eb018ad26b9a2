package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/api"
	"github.com/streamgate/streamgate/internal/usage"
)

// HeaderReplica names the replica that answered (config replica, else the
// host name), on every response.
const HeaderReplica = "X-Streamgate-Replica"

// Replica is the name of this replica: the config's replica, else the host
// name.
func (g *Gateway) Replica() string { return g.replica }

// ledgerRoom is what a usage recorder that buffers (usage.Writer) says of
// its buffer.
type ledgerRoom interface {
	Stats() usage.Stats
	MaxPending() int
}

// ledgerState is the usage ledger's part of readiness: ok, degraded (the
// store does not answer but records are buffered in memory and written
// when it does), or down (the buffer is full: new records would be lost,
// so the replica cannot serve as promised).
func (g *Gateway) ledgerState(ctx context.Context) (state, reason string) {
	if g.ping == nil {
		return "ok", ""
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := g.ping(ctx)
	cancel()
	if err == nil {
		return "ok", ""
	}
	why := "usage store unreachable: " + err.Error()
	if lr, ok := g.rec.(ledgerRoom); ok {
		st := lr.Stats()
		if max := lr.MaxPending(); max > 0 && st.Pending >= uint64(max) {
			return "down", why + "; its buffer is full (" + strconv.FormatUint(st.Pending, 10) + " records waiting): new records are lost"
		}
		return "degraded", why + "; " + strconv.FormatUint(st.Pending, 10) + " records buffered in memory, written when it answers"
	}
	return "degraded", why + "; records are buffered in memory"
}

// noteLedger logs a change of the ledger's readiness once (WARN when it
// degrades, INFO when it recovers) and sets streamgate_ready_degraded.
func (g *Gateway) noteLedger(ctx context.Context, state, reason string) {
	bad := state != "ok"
	if bad {
		g.readyDegraded.Set(1)
	} else {
		g.readyDegraded.Set(0)
	}
	if g.ledgerBad.Swap(bad) == bad {
		return
	}
	if bad {
		g.log.LogAttrs(ctx, slog.LevelWarn, "readiness: "+state, slog.String("replica", g.replica), slog.String("reason", reason))
		return
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "readiness: usage store reachable again", slog.String("replica", g.replica))
}

// notReady answers /readyz's 503: this replica cannot serve.
func (g *Gateway) notReady(w http.ResponseWriter, reason string) {
	e := api.NewError("server_error", "not_ready", "", reason)
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "replica": g.replica, "reason": reason, "error": e.Error})
}
