package keyshare

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/streamgate/streamgate/internal/keypool"
	"github.com/streamgate/streamgate/internal/redisguard"
	"github.com/streamgate/streamgate/internal/redisguard/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newPool(t *testing.T) *keypool.Pool {
	t.Helper()
	p, err := keypool.New(keypool.Config{Provider: "p", Keys: []keypool.Key{{Name: "a", Secret: "sk-a"}, {Name: "b", Secret: "sk-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// until waits for cond, at most 2 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 2 s: %s", what)
		}
	}
}

// Two replicas' boards on one Redis: a bench and a disable published by
// one reach the other's pool; a reset by either ends them on both; a
// replica that starts later learns what was published before it.
func TestShared(t *testing.T) {
	c, err := redisguard.NewClient(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prefix := fmt.Sprintf("sgtest:keyshare:%d:", time.Now().UnixNano())
	defer func() {
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		for _, k := range keys {
			c.Del(context.Background(), k)
		}
	}()
	pa, pb := newPool(t), newPool(t)
	a := New(Options{Client: c, Prefix: prefix, Pools: map[string]*keypool.Pool{"p": pa}})
	defer a.Close()
	b := New(Options{Client: c, Prefix: prefix, Pools: map[string]*keypool.Pool{"p": pb}})
	defer b.Close()
	state := func(p *keypool.Pool, i int) keypool.KeyState { return p.Snapshot(nil)[i] }

	pa.Bench("a", time.Now().Add(time.Minute))
	a.Bench("p", "a", time.Now().Add(time.Minute))
	pa.Disable("b", "the provider answered 401 Unauthorized")
	a.Disable("p", "b", "the provider answered 401 Unauthorized")
	until(t, "the other replica's key a benched", func() bool { return state(pb, 0).BenchedUntil != "" })
	until(t, "the other replica's key b disabled", func() bool { return state(pb, 1).Disabled != "" })
	if got := state(pb, 0).Benches; got != 0 {
		t.Errorf("benches counted on the other replica: got %d, want 0 (its own 429s only)", got)
	}

	pc := newPool(t)
	late := New(Options{Client: c, Prefix: prefix, Pools: map[string]*keypool.Pool{"p": pc}})
	defer late.Close()
	until(t, "a replica started later learns both", func() bool { return state(pc, 0).BenchedUntil != "" && state(pc, 1).Disabled != "" })

	pb.Reset()
	if err := b.Reset(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*keypool.Pool{"first": pa, "late": pc} {
		until(t, name+" replica reset", func() bool { return state(p, 0).BenchedUntil == "" && state(p, 1).Disabled == "" })
	}
	time.Sleep(3 * Every) // the resetting replica does not reset again at its poll
	pb.Disable("a", "x")
	time.Sleep(3 * Every)
	if state(pb, 0).Disabled == "" {
		t.Errorf("the resetting replica reset its pool again at a later poll")
	}
}
