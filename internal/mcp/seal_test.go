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

// Ids sealed once by testSealer for Binding{HashKey("dev"), "docs"},
// expiring in 2096: a session (version 2, CapSampling) and a reference
// (server docs, ReplyTo r1). Fixed, so that every fuzzing worker knows them.
const (
	fuzzSessionID = "ASMoEPZ6UsPUxONWA0SNVzks9yTcsdbxfL2EF55AciWC-Gf6sQ"
	fuzzReference = "AWI06UElM1xoI4OJlurBGuhrhvLPBTm-PgXCR_IBhxpEkJDzcW58Og"
)

// FuzzOpen: whatever bytes come as a session id, Open never panics and
// opens only the ids the sealer made (here, the one above), with the state
// sealed in them; the same for references.
func FuzzOpen(f *testing.F) {
	sl := testSealer(f)
	now := time.Unix(1_800_000_000, 0)
	b := Binding{Key: HashKey("dev"), Route: "docs"}
	if s, err := sl.Open(fuzzSessionID, &b, now); err != nil || s.Version != 2 || s.Caps != CapSampling {
		f.Fatalf("the fixed session id: %+v %v", s, err)
	}
	f.Add(fuzzSessionID)
	f.Add(fuzzReference)
	f.Add(fuzzSessionID[:20] + "A" + fuzzSessionID[21:])
	f.Add(strings.Repeat("A", sessionIDLen))
	f.Add(fuzzSessionID[:len(fuzzSessionID)-1] + "R") // the same bytes but for the unused bits: another spelling
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := sl.Open(in, &b, now)
		if err == nil && (in != fuzzSessionID || got.Version != 2 || got.Caps != CapSampling) {
			t.Fatalf("opened %q as %+v: only %q was sealed", in, got, fuzzSessionID)
		}
		r, err := sl.OpenReference(in, &b, now)
		if err == nil && (in != fuzzReference || r.ReplyTo != "r1" || r.Server != "docs") {
			t.Fatalf("opened reference %q as %+v: only %q was sealed", in, r, fuzzReference)
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
