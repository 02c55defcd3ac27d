package store_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/herdhq/herd/store"
)

// randomLog is a valid log of n entries from an empty group: sessions
// opening and ending, claims (new records and existing ones), releases and
// give-backs, restores and partition sets.
func randomLog(seed uint64, n int) []store.Change { return randomLogOf(seed, n, 200) }

// randomLogOf is randomLog on parts partitions.
func randomLogOf(seed uint64, n, parts int) []store.Change {
	rng := rand.New(rand.NewPCG(seed, 1))
	var cs []store.Change
	var sessions []string
	records := map[string]store.Ownership{}
	next := func(c store.Change) {
		c.Version = store.Version{Seq: uint64(len(cs) + 1), Tag: 7}
		cs = append(cs, c)
	}
	for len(cs) < n {
		p := fmt.Sprintf("p%03d", rng.IntN(parts))
		r, has := records[p]
		switch op := rng.IntN(10); {
		case op == 0 || len(sessions) == 0:
			id := fmt.Sprintf("s%04d", len(cs))
			sessions = append(sessions, id)
			next(store.Change{Kind: store.SessionOpened, Session: id, Member: "m" + id, Weight: rng.IntN(3)})
		case op == 1:
			i := rng.IntN(len(sessions))
			next(store.Change{Kind: store.SessionExpired, Session: sessions[i]})
			sessions = append(sessions[:i], sessions[i+1:]...)
		case op < 6:
			s := sessions[rng.IntN(len(sessions))]
			o := store.Ownership{Partition: p, Session: s, Member: "m" + s, Epoch: r.Epoch + 1 + rng.Uint64N(3)}
			records[p] = o
			next(store.Change{Kind: store.Claimed, Partition: p, Session: s, Member: o.Member, Epoch: o.Epoch})
		case op < 8 && has && r.Session != "":
			c := store.Change{Kind: store.Released, Partition: p, Session: r.Session, Epoch: r.Epoch}
			if rng.IntN(2) == 0 {
				c.GivenBack = r.Session
			}
			next(c)
			r.Session, r.Member = "", ""
			records[p] = r
		case op == 8 && !has:
			records[p] = store.Ownership{Partition: p, Epoch: 5}
			next(store.Change{Kind: store.Restored, Partition: p, Epoch: 5})
		case op == 8 && r.Session == "":
			r.Epoch++
			records[p] = r
			next(store.Change{Kind: store.Restored, Partition: p, Epoch: r.Epoch})
		case op == 9:
			next(store.Change{Kind: store.PartitionsSet, Partitions: []store.Partition{{ID: p, Weight: 1}, {ID: "a"}}})
		}
	}
	return cs
}

// ApplyAll of a batch gives what Apply of each entry gives.
func TestApplyAllEqualsApply(t *testing.T) {
	for seed := range uint64(20) {
		cs := randomLog(seed, 2000)
		one := &store.Snapshot{}
		for _, c := range cs {
			if err := one.Apply(c); err != nil {
				t.Fatalf("seed %d: Apply: %v", seed, err)
			}
		}
		all := &store.Snapshot{}
		for i := 0; i < len(cs); {
			j := min(len(cs), i+1+int(seed*37)%300)
			if err := all.ApplyAll(cs[i:j]); err != nil {
				t.Fatalf("seed %d: ApplyAll: %v", seed, err)
			}
			i = j
		}
		if fmt.Sprint(one) != fmt.Sprint(all) {
			t.Fatalf("seed %d: ApplyAll gave\n%v\nApply gave\n%v", seed, all, one)
		}
	}
}

// ApplyAll on a snapshot large enough to be indexed gives what Apply gives,
// also when the caller changes Owners itself between calls (moving every
// record the index knows).
func TestApplyAllIndexed(t *testing.T) {
	same := func(a, b *store.Snapshot) bool {
		return fmt.Sprint(a.Sessions, a.Partitions, a.Owners, a.Version) == fmt.Sprint(b.Sessions, b.Partitions, b.Owners, b.Version)
	}
	for seed := range uint64(3) {
		cs := randomLogOf(seed, 40000, 8000)
		one, all := &store.Snapshot{}, &store.Snapshot{}
		for i := 0; i < len(cs); {
			j := min(len(cs), i+1+int(seed*37+100)%1000)
			for _, c := range cs[i:j] {
				if err := one.Apply(c); err != nil {
					t.Fatalf("seed %d: Apply: %v", seed, err)
				}
			}
			if err := all.ApplyAll(cs[i:j]); err != nil {
				t.Fatalf("seed %d: ApplyAll: %v", seed, err)
			}
			if !same(one, all) {
				t.Fatalf("seed %d: after entry %d, ApplyAll and Apply differ", seed, j)
			}
			if i%7 == 3 {
				// The caller inserts a record first (every record moves),
				// and works on a clone (which shares the index).
				o := store.Ownership{Partition: fmt.Sprintf("a%d", i), Epoch: 1}
				one.Owners = append([]store.Ownership{o}, one.Owners...)
				all = all.Clone()
				all.Owners = append([]store.Ownership{o}, all.Owners...)
			}
			i = j
		}
		if len(all.Owners) < 4096 {
			t.Fatalf("seed %d: %d records: too few to be indexed", seed, len(all.Owners))
		}
	}
}

// ApplyAllFunc calls its function with each entry before applying it, and
// the index RecordIndex gives for the entry's partition at that moment
// (-1 for none, and for entries without a partition): checked against a
// copy the entries are applied to one by one, large enough to be indexed.
func TestApplyAllFuncSeesRecordIndex(t *testing.T) {
	cs := randomLogOf(4, 30000, 6000)
	one, all := &store.Snapshot{}, &store.Snapshot{}
	for i := 0; i < len(cs); {
		j := min(len(cs), i+700)
		// Records added within a batch are merged in at its end:
		// RecordIndex on the batch's start state answers for them.
		start := one.Clone()
		k := i
		err := all.ApplyAllFunc(cs[i:j], func(c store.Change, rec int) {
			if c.Version != cs[k].Version || c.Partition != cs[k].Partition {
				t.Fatalf("entry %d: seen %+v, want %+v", k, c, cs[k])
			}
			want := -1
			if c.Partition != "" {
				if r, ok := start.RecordIndex(c.Partition); ok {
					want = r
				}
			}
			if rec != want {
				t.Fatalf("entry %d (%+v): seen with record %d, want %d", k, c, rec, want)
			}
			k++
		})
		if err != nil {
			t.Fatalf("ApplyAllFunc: %v", err)
		}
		if k != j {
			t.Fatalf("ApplyAllFunc saw %d entries of %d", k-i, j-i)
		}
		for _, c := range cs[i:j] {
			if err := one.Apply(c); err != nil {
				t.Fatalf("Apply: %v", err)
			}
		}
		i = j
	}
	if len(all.Owners) < 4096 {
		t.Fatalf("%d records: too few to be indexed", len(all.Owners))
	}
}

// The GivenBack mark: set by a give-back, kept by a plain release and by a
// claim of another session, cleared by the giver's claim and by a restore;
// Apply and ApplyAll agree.
func TestApplyGivenBack(t *testing.T) {
	seq := uint64(0)
	at := func(c store.Change) store.Change {
		seq++
		c.Version = store.Version{Seq: seq, Tag: 1}
		return c
	}
	steps := []struct {
		c    store.Change
		want string // the record's mark after c
	}{
		{at(store.Change{Kind: store.SessionOpened, Session: "A", Member: "a"}), ""},
		{at(store.Change{Kind: store.SessionOpened, Session: "B", Member: "b"}), ""},
		{at(store.Change{Kind: store.Claimed, Partition: "p", Session: "A", Member: "a", Epoch: 1}), ""},
		{at(store.Change{Kind: store.Released, Partition: "p", Session: "A", Epoch: 1, GivenBack: "A"}), "A"},
		{at(store.Change{Kind: store.Claimed, Partition: "p", Session: "B", Member: "b", Epoch: 2}), "A"},
		{at(store.Change{Kind: store.Released, Partition: "p", Session: "B", Epoch: 2}), "A"},
		{at(store.Change{Kind: store.Claimed, Partition: "p", Session: "B", Member: "b", Epoch: 3}), "A"},
		{at(store.Change{Kind: store.Released, Partition: "p", Session: "B", Epoch: 3, GivenBack: "B"}), "B"},
		{at(store.Change{Kind: store.Claimed, Partition: "p", Session: "A", Member: "a", Epoch: 4}), "B"},
		{at(store.Change{Kind: store.Released, Partition: "p", Session: "A", Epoch: 4, GivenBack: "A"}), "A"},
		{at(store.Change{Kind: store.Claimed, Partition: "p", Session: "A", Member: "a", Epoch: 5}), ""},
		{at(store.Change{Kind: store.Released, Partition: "p", Session: "A", Epoch: 5, GivenBack: "A"}), "A"},
		{at(store.Change{Kind: store.Restored, Partition: "p", Epoch: 9}), ""},
	}
	one, all := &store.Snapshot{}, &store.Snapshot{}
	for i, st := range steps {
		if err := one.Apply(st.c); err != nil {
			t.Fatalf("step %d: Apply(%+v): %v", i, st.c, err)
		}
		if err := all.ApplyAll([]store.Change{st.c}); err != nil {
			t.Fatalf("step %d: ApplyAll(%+v): %v", i, st.c, err)
		}
		for name, s := range map[string]*store.Snapshot{"Apply": one, "ApplyAll": all} {
			if len(s.Owners) == 0 {
				continue
			}
			if got := s.Owners[0].GivenBack; got != st.want {
				t.Fatalf("step %d (%v by %q): %s leaves GivenBack %q; want %q", i, st.c.Kind, st.c.Session, name, got, st.want)
			}
		}
	}
}

// ApplyAll rejects an entry out of sequence and a release of a record not
// held, as Apply does.
func TestApplyAllRejects(t *testing.T) {
	s := &store.Snapshot{}
	if err := s.ApplyAll([]store.Change{{Version: store.Version{Seq: 2}, Kind: store.Claimed, Partition: "p", Epoch: 1}}); err == nil {
		t.Fatal("ApplyAll of entry 2 to version 0: no error")
	}
	if err := s.ApplyAll([]store.Change{{Version: store.Version{Seq: 1}, Kind: store.Released, Partition: "p", Epoch: 1}}); err == nil {
		t.Fatal("ApplyAll of a release of no record: no error")
	}
}

// BenchmarkApplyPlacement applies a first placement of 100,000 new records
// in batches of 1,000 (what Changes returns at most per call in the
// member's loop), with ApplyAll and with Apply one by one.
//
//	go test -run '^$' -bench ApplyPlacement -benchtime 3x ./store/
//
// On a shared 2-core AMD EPYC: ApplyAll 0.44 s, Apply 7.3 s.
func BenchmarkApplyPlacement(b *testing.B) {
	cs := make([]store.Change, 100_000)
	for i := range cs {
		cs[i] = store.Change{Version: store.Version{Seq: uint64(i + 1)}, Kind: store.Claimed,
			Partition: fmt.Sprintf("partition-%06d", (i*7919)%100_000), Session: "S", Member: "m", Epoch: 1}
	}
	for _, tc := range []struct {
		name string
		all  bool
	}{{"ApplyAll", true}, {"Apply", false}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				s := &store.Snapshot{}
				for i := 0; i < len(cs); i += 1000 {
					if tc.all {
						if err := s.ApplyAll(cs[i : i+1000]); err != nil {
							b.Fatal(err)
						}
						continue
					}
					for _, c := range cs[i : i+1000] {
						if err := s.Apply(c); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}

// BenchmarkApplyClaims applies 100,000 claims, 1,000 per call, to a copy
// that has a record (or a member's placeholder) for every partition already:
// what each member does in a first placement. The claims come from 100
// sessions, 1,000 each in a row, as batches of claims do.
//
//	go test -run '^$' -bench ApplyClaims -benchtime 3x ./store/
func BenchmarkApplyClaims(b *testing.B) {
	const n, sessions = 100_000, 100
	id := func(i int) string { return fmt.Sprintf("%026d", i) }
	base := &store.Snapshot{}
	for i := range sessions {
		base.Sessions = append(base.Sessions, store.SessionInfo{ID: fmt.Sprintf("S%025d", i), Member: fmt.Sprint("m", i)})
	}
	for i := range n {
		base.Owners = append(base.Owners, store.Ownership{Partition: id(i)})
	}
	cs := make([]store.Change, n)
	for i := range cs {
		// Strings of their own, as decoded from the log.
		sess := i / (n / sessions)
		cs[i] = store.Change{Version: store.Version{Seq: uint64(i + 1)}, Kind: store.Claimed,
			Partition: id((i * 7919) % n), Session: fmt.Sprintf("S%025d", sess), Member: fmt.Sprint("m", sess), Epoch: 1}
	}
	for b.Loop() {
		s := base.Clone()
		for i := 0; i < len(cs); i += 1000 {
			if err := s.ApplyAll(cs[i : i+1000]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkApplyFleet applies a placement of 100,000 partitions by 100
// sessions (1,000 claims each in a row) 10,000 claims per call, as a
// member's feed applies what one read of the log returns, to a copy read
// before the placement: with a placeholder record for every partition (as
// a member keeps it), and with no records (every claim adds one). It
// reports the CPU (this process's), bytes and allocations per claim (the
// copy made before each run counted in the bytes: 96 per claim):
//
//	go test -run '^$' -bench ApplyFleet -benchtime 20x ./store/
func BenchmarkApplyFleet(b *testing.B) {
	const n, sessions = 100_000, 100
	base := &store.Snapshot{}
	for i := range sessions {
		base.Sessions = append(base.Sessions, store.SessionInfo{ID: fmt.Sprintf("S%025d", i), Member: fmt.Sprintf("host-%03d-12345", i)})
	}
	id := func(i int) string { return fmt.Sprintf("partition-%06d", i) }
	cs := make([]store.Change, n)
	for i := range cs {
		// Strings of their own, as decoded from the log.
		sess := i / (n / sessions)
		cs[i] = store.Change{Version: store.Version{Seq: uint64(i + 1)}, Kind: store.Claimed,
			Partition: id(i), Session: fmt.Sprintf("S%025d", sess), Member: fmt.Sprintf("host-%03d-12345", sess), Epoch: 1}
	}
	for _, placeholders := range []bool{true, false} {
		b.Run(fmt.Sprintf("placeholders=%v", placeholders), func(b *testing.B) {
			from := base.Clone()
			if placeholders {
				for i := range n {
					from.Owners = append(from.Owners, store.Ownership{Partition: id(i)})
				}
			}
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var spent time.Duration
			for b.Loop() {
				b.StopTimer()
				s := from.Clone()
				b.StartTimer()
				t0 := cpuTime(b)
				for i := 0; i < len(cs); i += 10_000 {
					if err := s.ApplyAllFunc(cs[i:i+10_000], func(store.Change, int) {}); err != nil {
						b.Fatal(err)
					}
				}
				spent += cpuTime(b) - t0
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			per := float64(n) * float64(b.N)
			b.ReportMetric(float64(spent.Nanoseconds())/per, "cpu-ns/claim")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/per, "B/claim")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/per, "allocs/claim")
		})
	}
}

// cpuTime is the CPU time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
