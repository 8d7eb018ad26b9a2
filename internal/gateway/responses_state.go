package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/streamgate/streamgate/internal/auth"
	"github.com/streamgate/streamgate/internal/responses"
	"github.com/streamgate/streamgate/internal/respstore"
)

// errRespStore: the response store failed (unreachable); a 503.
var errRespStore = errors.New("response store unreachable")

// storeWriteTimeout bounds the write of one response, off the request.
const storeWriteTimeout = 10 * time.Second

// toStore is what is kept of a response (store true): its key, its
// input items, the response it continued, and its response object once
// it ended (nil: it never began, as when the request failed before the
// stream; nothing is stored then) with where its output items stand in
// it, as the encoder wrote it: stored without being read again.
type toStore struct {
	id, keyID, previous string
	input               []json.RawMessage
	body                []byte
	output              []responses.OutputItem
}

// resolveState reads what the request rq of keyID refers to in the
// response store, into rq: the items of its previous_response_id's chain
// (Prior) and its item_reference items (replaced by the items). It says
// whether the response is kept (rq.Keep, store true or absent) and
// returns what to store then, else nil.
// referencedItems replaces rq's input by its items, each item_reference read
// from the response store (none: the reference is not found), and returns
// them.
func (g *Gateway) referencedItems(ctx context.Context, keyID string, rq *responses.Request) ([]json.RawMessage, error) {
	items, err := responses.Items(rq.Input, func(id string) (json.RawMessage, error) {
		notFound := &notFoundError{param: "input", code: "item_not_found", msg: fmt.Sprintf("Item with id '%s' not found.", id)}
		if g.respStore == nil {
			return nil, notFound
		}
		it, err := g.respStore.Item(ctx, keyID, id)
		if errors.Is(err, respstore.ErrNotFound) {
			return nil, notFound
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errRespStore, err)
		}
		return it, nil
	})
	if err != nil {
		return nil, err
	}
	if rq.Input, err = json.Marshal(items); err != nil {
		return nil, invalid("input", "input cannot be read: %v", err)
	}
	return items, nil
}

func (g *Gateway) resolveState(ctx context.Context, keyID string, rq *responses.Request) (*toStore, error) {
	keep := rq.Store == nil || *rq.Store
	var items []json.RawMessage
	if keep || responses.HasReference(rq.Input) {
		var err error
		if items, err = g.referencedItems(ctx, keyID, rq); err != nil {
			return nil, err
		}
	}
	prev, err := g.chain(ctx, keyID, rq)
	if err != nil || !keep {
		return nil, err
	}
	rq.Keep = true
	return &toStore{keyID: keyID, previous: prev, input: items}, nil
}

// chain sets rq.Prior to the chain of its previous_response_id, if it
// has one, and returns that id.
func (g *Gateway) chain(ctx context.Context, keyID string, rq *responses.Request) (string, error) {
	if rq.PreviousResponseID == nil || *rq.PreviousResponseID == "" {
		return "", nil
	}
	id := *rq.PreviousResponseID
	prior, err := g.respStore.Chain(ctx, keyID, id)
	if errors.Is(err, respstore.ErrNotFound) {
		return "", &notFoundError{param: "previous_response_id", code: "previous_response_not_found",
			msg: fmt.Sprintf("Previous response with id '%s' not found.", id)}
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", errRespStore, err)
	}
	rq.Prior = prior
	return id, nil
}

// keep writes the response st to the store, off the request's path, and
// then calls end (the store's Begin). A failed write is logged: the
// response was answered and its usage is recorded all the same.
func (g *Gateway) keep(st *toStore, end func()) {
	if st.body == nil {
		end()
		return
	}
	go func() {
		defer end()
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		output := make([]respstore.Item, len(st.output))
		for i, o := range st.output {
			output[i] = respstore.Item{ID: o.ID, JSON: st.body[o.Start:o.End]}
		}
		err := g.respStore.Put(ctx, &respstore.Response{ID: st.id, KeyID: st.keyID, PreviousID: st.previous,
			Body: st.body, Input: respstore.ItemsOf(st.input), Output: output})
		if err != nil {
			g.log.LogAttrs(ctx, slog.LevelError, "store response", slog.String("response_id", st.id), slog.String("error", err.Error()))
		}
	}()
}

// responseID is the "id" member of a JSON object (a response, an item).
func responseID(body []byte) (string, error) {
	var v struct {
		ID string `json:"id"`
	}
	err := json.Unmarshal(body, &v)
	return v.ID, err
}

// responseNotFound is OpenAI's answer for a response that is not there
// (or is another key's: never a 403 that says it exists).
func responseNotFound(id string) error {
	return &notFoundError{msg: fmt.Sprintf("Response with id '%s' not found.", id)}
}

// storeErr maps a store error of response id.
func storeErr(id string, err error) error {
	if errors.Is(err, respstore.ErrNotFound) {
		return responseNotFound(id)
	}
	return fmt.Errorf("%w: %w", errRespStore, err)
}

// responseByID serves GET /v1/responses/{id} (the stored response object)
// and DELETE /v1/responses/{id}, for the key that created it only.
func (g *Gateway) responseByID(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	infoFrom(r.Context()).keyID = p.KeyID
	id := r.PathValue("id")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if r.URL.Query().Get("stream") == "true" {
			g.writeError(w, r, invalid("stream", "stream=true is not supported by the gateway: it keeps a response's object, not its events; retrieve it without stream"))
			return
		}
		if g.respStore == nil {
			g.writeError(w, r, responseNotFound(id))
			return
		}
		body, err := g.respStore.Get(r.Context(), p.KeyID, id)
		if err != nil {
			g.writeError(w, r, storeErr(id, err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	case http.MethodDelete:
		if g.respStore == nil {
			g.writeError(w, r, responseNotFound(id))
			return
		}
		if err := g.respStore.Delete(r.Context(), p.KeyID, id); err != nil {
			g.writeError(w, r, storeErr(id, err))
			return
		}
		writeJSON(w, http.StatusOK, struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{id, "response.deleted", true})
	default:
		g.writeError(w, r, &methodError{allow: "GET, DELETE"})
	}
}

// inputItems serves GET /v1/responses/{id}/input_items: a page of the
// stored response's input items, as OpenAI's list (limit 1-100, default
// 20; order desc, the default, or asc; after an item id).
func (g *Gateway) inputItems(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	infoFrom(r.Context()).keyID = p.KeyID
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		g.writeError(w, r, &methodError{allow: "GET"})
		return
	}
	id := r.PathValue("id")
	q := r.URL.Query()
	lq := respstore.ListQuery{Limit: 20, After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			g.writeError(w, r, invalid("limit", "limit must be an integer from 1 to 100, got %q", v))
			return
		}
		lq.Limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.Asc = true
	default:
		g.writeError(w, r, invalid("order", "order must be asc or desc, got %q", q.Get("order")))
		return
	}
	if g.respStore == nil {
		g.writeError(w, r, responseNotFound(id))
		return
	}
	items, more, err := g.respStore.InputItems(r.Context(), p.KeyID, id, lq)
	if err != nil {
		if errors.Is(err, respstore.ErrNotFound) && lq.After != "" {
			if _, gerr := g.respStore.Get(r.Context(), p.KeyID, id); gerr == nil {
				g.writeError(w, r, &notFoundError{param: "after", msg: fmt.Sprintf("Item with id '%s' not found.", lq.After)})
				return
			}
		}
		g.writeError(w, r, storeErr(id, err))
		return
	}
	list := struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{Object: "list", Data: items, HasMore: more}
	if list.Data == nil {
		list.Data = []json.RawMessage{}
	}
	if len(items) > 0 {
		first, _ := responseID(items[0])
		last, _ := responseID(items[len(items)-1])
		list.FirstID, list.LastID = &first, &last
	}
	writeJSON(w, http.StatusOK, list)
}
