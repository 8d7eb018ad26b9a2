package respstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/streamgate/streamgate/internal/sqldb/sqldbtest"
)

// clock is a test clock that tests move.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func msg(id, text string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"type":"message","role":"user","content":[{"type":"input_text","text":%q}]}`, id, text))
}

func ids(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, it := range items {
		out = append(out, itemID(it))
	}
	return out
}

func eq(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestStore(t *testing.T) {
	for _, k := range sqldbtest.Kinds {
		t.Run(k.Name, func(t *testing.T) {
			ctx := sqldbtest.Context(t)
			dsn := k.DSN(t)
			clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			s, err := Open(ctx, dsn, Options{Retention: time.Hour, Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Migration re-run: a second Open of the same database is fine.
			s2, err := Open(ctx, dsn, Options{})
			if err != nil {
				t.Fatalf("second open (migration re-run): %v", err)
			}
			s2.Close()

			first := &Response{ID: "resp_1", KeyID: "alice", CreatedAt: clk.now(), Body: json.RawMessage(`{"id":"resp_1"}`),
				Input:  ItemsOf([]json.RawMessage{msg("msg_a", "one"), msg("msg_b", "two"), msg("msg_c", "three")}),
				Output: []Item{{ID: "msg_o1", JSON: json.RawMessage(`{"id":"msg_o1","type":"message","role":"assistant","content":[{"type":"output_text","text":"ans1"}]}`)}}}
			if err := s.Put(ctx, first); err != nil {
				t.Fatal(err)
			}
			clk.add(time.Minute)
			second := &Response{ID: "resp_2", KeyID: "alice", PreviousID: "resp_1", CreatedAt: clk.now(), Body: json.RawMessage(`{"id":"resp_2"}`),
				Input:  ItemsOf([]json.RawMessage{msg("msg_d", "four")}),
				Output: []Item{{ID: "msg_o2", JSON: json.RawMessage(`{"id":"msg_o2","type":"message"}`)}}}
			if err := s.Put(ctx, second); err != nil {
				t.Fatal(err)
			}

			body, err := s.Get(ctx, "alice", "resp_1")
			if err != nil || string(body) != `{"id":"resp_1"}` {
				t.Fatalf("Get = %s, %v; want the body", body, err)
			}
			if _, err := s.Get(ctx, "bob", "resp_1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get by another key: got %v, want ErrNotFound", err)
			}
			chain, err := s.Chain(ctx, "alice", "resp_2")
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ids(t, chain), []string{"msg_a", "msg_b", "msg_c", "msg_o1", "msg_d", "msg_o2"}; !eq(got, want) {
				t.Fatalf("Chain = %v, want %v", got, want)
			}
			if _, err := s.Chain(ctx, "bob", "resp_2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Chain by another key: got %v, want ErrNotFound", err)
			}
			it, err := s.Item(ctx, "alice", "msg_o1")
			if err != nil || itemID(it) != "msg_o1" {
				t.Fatalf("Item = %s, %v", it, err)
			}
			if _, err := s.Item(ctx, "bob", "msg_o1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Item by another key: got %v, want ErrNotFound", err)
			}

			// Paging, both orders.
			for _, c := range []struct {
				q    ListQuery
				want []string
				more bool
			}{
				{ListQuery{Limit: 20}, []string{"msg_c", "msg_b", "msg_a"}, false},
				{ListQuery{Limit: 2}, []string{"msg_c", "msg_b"}, true},
				{ListQuery{Limit: 2, After: "msg_b"}, []string{"msg_a"}, false},
				{ListQuery{Limit: 2, Asc: true}, []string{"msg_a", "msg_b"}, true},
				{ListQuery{Limit: 2, Asc: true, After: "msg_b"}, []string{"msg_c"}, false},
			} {
				items, more, err := s.InputItems(ctx, "alice", "resp_1", c.q)
				if err != nil || !eq(ids(t, items), c.want) || more != c.more {
					t.Errorf("InputItems(%+v) = %v, %v, %v; want %v, %v", c.q, ids(t, items), more, err, c.want, c.more)
				}
			}
			if _, _, err := s.InputItems(ctx, "bob", "resp_1", ListQuery{Limit: 20}); !errors.Is(err, ErrNotFound) {
				t.Fatalf("InputItems by another key: got %v, want ErrNotFound", err)
			}

			// Delete: by another key it is not found; by its key gone,
			// and the chain through it too.
			if err := s.Delete(ctx, "bob", "resp_1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Delete by another key: got %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, "alice", "resp_1"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "alice", "resp_1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, "alice", "resp_1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("second Delete: got %v, want ErrNotFound", err)
			}
			if _, err := s.Chain(ctx, "alice", "resp_2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Chain through a deleted response: got %v, want ErrNotFound", err)
			}
			if _, err := s.Item(ctx, "alice", "msg_a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Item of a deleted response: got %v, want ErrNotFound", err)
			}

			// Retention: past it a response is invisible at once, and
			// Purge deletes its rows.
			if n, err := s.Purge(ctx); err != nil || n != 0 {
				t.Fatalf("Purge before expiry = %d, %v; want 0", n, err)
			}
			clk.add(time.Hour)
			if _, err := s.Get(ctx, "alice", "resp_2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get of an expired response: got %v, want ErrNotFound", err)
			}
			if n, err := s.Purge(ctx); err != nil || n != 1 {
				t.Fatalf("Purge = %d, %v; want 1", n, err)
			}
			var left int
			if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM response_items`).Scan(&left); err != nil || left != 0 {
				t.Fatalf("items left after purge: %d, %v; want 0", left, err)
			}
		})
	}
}

// TestRun: the periodic purge removes expired rows on its own.
func TestRun(t *testing.T) {
	ctx := sqldbtest.Context(t)
	clk := &clock{t: time.Now()}
	s, err := Open(ctx, sqldbtest.SQLiteDSN(t), Options{Retention: time.Hour, PurgeEvery: 10 * time.Millisecond, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, &Response{ID: "resp_old", KeyID: "k", CreatedAt: clk.now(), Body: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Hour)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx, func(err error) { t.Error(err) }); close(done) }()
	defer func() { cancel(); <-done }()
	for {
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM responses`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the expired response is still there: %v", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestPendingWrite: a read of a response whose write has begun waits for
// it, so a client continuing at once finds it.
func TestPendingWrite(t *testing.T) {
	ctx := sqldbtest.Context(t)
	s, err := Open(ctx, sqldbtest.SQLiteDSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	end := s.Begin("resp_p")
	go func() {
		defer end()
		if err := s.Put(ctx, &Response{ID: "resp_p", KeyID: "k", Body: json.RawMessage(`{"id":"resp_p"}`)}); err != nil {
			t.Error(err)
		}
	}()
	if _, err := s.Get(ctx, "k", "resp_p"); err != nil {
		t.Fatalf("Get during the write: %v, want the response", err)
	}
}
