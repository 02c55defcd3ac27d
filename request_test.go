package herd

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
)

// A request to leave logged in the group (store.RequestLeave, the
// dashboard's "leave") makes the member it names leave gracefully, as
// Leave does: its partitions are handed over and its session closed at
// once (not left to expire), and Err says ErrLeaveRequested, which is also
// ErrLeft. A request naming another member changes nothing.
func TestLeaveOnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		join := func(id string) *Member {
			m, err := Join(t.Context(), st, Config{
				Group: "g", Member: id, Partitions: Numbered(4),
				Handler: func(c *Claim) error { <-c.Context().Done(); return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		a, b := join("a"), join("b")
		defer b.Leave(t.Context())
		time.Sleep(5 * time.Second)
		if err := st.Request(t.Context(), "g", store.Request{Action: store.RequestLeave, Member: "nobody"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if a.Err() != nil || b.Err() != nil {
			t.Fatalf("a request naming another member stopped a member: %v, %v", a.Err(), b.Err())
		}
		if err := st.Request(t.Context(), "g", store.Request{Action: store.RequestLeave, Member: "a"}); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		select {
		case <-a.Done():
		case <-time.After(DefaultSessionTTL):
			t.Fatalf("member a did not leave within %v of a request to leave", DefaultSessionTTL)
		}
		if !errors.Is(a.Err(), ErrLeaveRequested) || !errors.Is(a.Err(), ErrLeft) {
			t.Fatalf("a.Err() = %v; want ErrLeaveRequested (and ErrLeft)", a.Err())
		}
		// Gracefully: b has every partition well before a's TTL could
		// have passed.
		for {
			snap, err := st.Snapshot(t.Context(), "g")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, o := range snap.Owners {
				if o.Member == "b" {
					n++
				}
			}
			if len(snap.Sessions) == 1 && n == 4 {
				break
			}
			if time.Since(began) > DefaultSessionTTL/2 {
				t.Fatalf("%v after a left, b owns %d of 4 partitions and %d sessions are open; want 4 and 1 (a handed over)",
					time.Since(began), n, len(snap.Sessions))
			}
			time.Sleep(10 * time.Millisecond)
		}
		if b.Err() != nil {
			t.Fatalf("b stopped: %v", b.Err())
		}
	})
}

// TestKindSet: the kinds of a batch of entries, as the feed takes them to
// skip its passes for kinds absent: every kind present is had, an absent
// one is not (below 31), and load reports alone are told from load reports
// among others.
func TestKindSet(t *testing.T) {
	cs := []store.Change{{Kind: store.Claimed}, {Kind: store.Requested}, {Kind: store.Claimed}}
	s := kindsOf(cs)
	for _, k := range []store.ChangeKind{store.Claimed, store.Requested} {
		if !s.has(k) {
			t.Errorf("kind %v present, not had", k)
		}
	}
	for _, k := range []store.ChangeKind{store.SessionOpened, store.LoadsReported, store.Released, store.PartitionsSet} {
		if s.has(k) {
			t.Errorf("kind %v absent, but had", k)
		}
	}
	if !kindsOf([]store.Change{{Kind: 40}}).has(store.ChangeKind(33)) {
		t.Error("kinds from 31 on share a bit: one present must make the others had")
	}
	loads := []store.Change{{Kind: store.LoadsReported}, {Kind: store.LoadsReported}}
	if kindsOf(loads) != kindBit(store.LoadsReported) || kindsOf(append(loads, store.Change{Kind: store.Claimed})) == kindBit(store.LoadsReported) {
		t.Error("load reports alone not told from load reports among others")
	}
}
