package mcp

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func testSealer(t testing.TB) *Sealer {
	t.Helper()
	s, err := NewSealer([]byte("test secret"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealOpen(t *testing.T) {
	sl := testSealer(t)
	now := time.Unix(1_800_000_000, 0)
	b := Binding{Key: HashKey("dev"), Route: "docs"}
	in := Session{Version: 3, Caps: CapRoots | CapElicitationForm, Expires: now.Add(time.Hour)}
	id := sl.Seal(&in, &b)
	if len(id) != sessionIDLen {
		t.Fatalf("id %q: got length %d, want %d", id, len(id), sessionIDLen)
	}
	for _, c := range id {
		if c < 0x21 || c > 0x7e {
			t.Fatalf("id %q has %q, not visible ASCII (Mcp-Session-Id)", id, c)
		}
	}
	out, err := sl.Open(id, &b, now)
	if err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	// A second replica with the same secret opens it.
	if _, err := testSealer(t).Open(id, &b, now); err != nil {
		t.Fatalf("another sealer of the same secret: %v", err)
	}
	// Two seals of the same session differ (fresh nonces).
	if id2 := sl.Seal(&in, &b); id2 == id {
		t.Fatal("two seals gave the same id")
	}
}

func TestOpenRefuses(t *testing.T) {
	sl := testSealer(t)
	now := time.Unix(1_800_000_000, 0)
	b := Binding{Key: HashKey("dev"), Route: ""}
	s := Session{Version: 3, Expires: now.Add(time.Minute)}
	id := sl.Seal(&s, &b)
	other, _ := NewSealer([]byte("another secret"))
	ref, err := sl.SealReference(&Reference{Server: "docs", ReplyTo: "x", Expires: now.Add(time.Minute)}, &b)
	if err != nil {
		t.Fatal(err)
	}
	flip := []byte(id)
	flip[len(flip)/2] ^= 1
	cases := []struct {
		name string
		id   string
		b    Binding
		now  time.Time
		sl   *Sealer
		want error
	}{
		{"another key", id, Binding{Key: HashKey("ops")}, now, sl, ErrSessionInvalid},
		{"another route", id, Binding{Key: b.Key, Route: "docs"}, now, sl, ErrSessionInvalid},
		{"another secret", id, b, now, other, ErrSessionInvalid},
		{"tampered", string(flip), b, now, sl, ErrSessionInvalid},
		{"truncated", id[:len(id)-1], b, now, sl, ErrSessionInvalid},
		{"empty", "", b, now, sl, ErrSessionInvalid},
		{"a reference as a session", ref, b, now, sl, ErrSessionInvalid},
		{"expired", id, b, now.Add(time.Minute), sl, ErrSessionExpired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.sl.Open(c.id, &c.b, c.now); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if _, err := sl.OpenReference(id, &b, now); !errors.Is(err, ErrSessionInvalid) {
		t.Fatalf("a session id opened as a reference: got %v, want %v", err, ErrSessionInvalid)
	}
}

func TestReference(t *testing.T) {
	sl := testSealer(t)
	now := time.Unix(1_800_000_000, 0)
	b := Binding{Key: HashKey("dev"), Route: "docs"}
	in := Reference{Server: "docs", ReplyTo: strings.Repeat("h", 300), Expires: now.Add(time.Minute)}
	id, err := sl.SealReference(&in, &b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sl.OpenReference(id, &b, now)
	if err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	if _, err := sl.OpenReference(id, &Binding{Key: HashKey("ops"), Route: "docs"}, now); !errors.Is(err, ErrSessionInvalid) {
		t.Fatalf("another key: got %v, want %v", err, ErrSessionInvalid)
	}
	if _, err := sl.OpenReference(id, &b, now.Add(time.Minute)); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("expired: got %v, want %v", err, ErrSessionExpired)
	}
}

// FuzzOpen: whatever bytes come as a session id, Open never panics and
// opens only the ids the sealer made (here, the seed's), with the state
// sealed in them; the same for references.
func FuzzOpen(f *testing.F) {
	sl := testSealer(f)
	now := time.Unix(1_800_000_000, 0)
	b := Binding{Key: HashKey("dev"), Route: "docs"}
	s := Session{Version: 2, Caps: CapSampling, Expires: now.Add(time.Hour)}
	id := sl.Seal(&s, &b)
	ref, _ := sl.SealReference(&Reference{Server: "docs", ReplyTo: "r1", Expires: now.Add(time.Hour)}, &b)
	f.Add(id)
	f.Add(ref)
	f.Add(id[:20] + "A" + id[21:])
	f.Add(strings.Repeat("A", sessionIDLen))
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := sl.Open(in, &b, now)
		if err == nil && (in != id || got.Version != s.Version || got.Caps != s.Caps) {
			t.Fatalf("opened %q as %+v: only %q was sealed", in, got, id)
		}
		r, err := sl.OpenReference(in, &b, now)
		if err == nil && (in != ref || r.ReplyTo != "r1") {
			t.Fatalf("opened reference %q as %+v: only %q was sealed", in, r, ref)
		}
	})
}

// BenchmarkSealOpen: one session sealed and opened (issue 38: ≤ 5 µs, and
// no allocation beyond the id itself).
func BenchmarkSealOpen(b *testing.B) {
	sl := testSealer(b)
	now := time.Now()
	bind := Binding{Key: HashKey("dev"), Route: "docs"}
	s := Session{Version: 3, Caps: CapRoots, Expires: now.Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		id := sl.Seal(&s, &bind)
		if _, err := sl.Open(id, &bind, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	sl := testSealer(b)
	now := time.Now()
	bind := Binding{Key: HashKey("dev"), Route: "docs"}
	s := Session{Version: 3, Caps: CapRoots, Expires: now.Add(time.Hour)}
	id := sl.Seal(&s, &bind)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sl.Open(id, &bind, now); err != nil {
			b.Fatal(err)
		}
	}
}
