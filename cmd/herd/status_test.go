package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/store"
	"github.com/herdhq/herd/store/memstore"
	"github.com/herdhq/herd/store/redisstore"
)

// fleet is members of one group run in this process, each partition's
// handler saving "cp-<partition>" once and then waiting for its end.
type fleet struct {
	t       *testing.T
	st      store.Store
	group   string
	members []*herd.Member
}

func startFleet(t *testing.T, st store.Store, group string, n int, ps []store.Partition) *fleet {
	t.Helper()
	f := &fleet{t: t, st: st, group: group}
	for i := range n {
		cfg := herd.Config{
			Group:      group,
			Member:     fmt.Sprintf("host%d-%d", i+1, 1000+i),
			Partitions: ps,
			SessionTTL: 2 * time.Second,
			Logger:     slog.New(slog.DiscardHandler),
			Handler: func(c *herd.Claim) error {
				if err := c.Checkpoint(c.Context(), []byte("cp-"+c.Partition)); err != nil && c.Context().Err() == nil {
					return err
				}
				<-c.Context().Done()
				return nil
			},
		}
		m, err := herd.Join(context.Background(), st, cfg)
		if err != nil {
			t.Fatalf("Join member %d: %v", i+1, err)
		}
		f.members = append(f.members, m)
	}
	t.Cleanup(func() { f.leave(len(f.members)) })
	return f
}

// leave makes the first n members still running leave.
func (f *fleet) leave(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range f.members[:n] {
		_ = m.Leave(ctx)
	}
	f.members = f.members[n:]
}

// readJSON runs status once with --json and decodes its report.
func readJSON(t *testing.T, run func(out *bytes.Buffer) error) statusReport {
	t.Helper()
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out.String())
	}
	var rep statusReport
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("status --json printed something that does not decode as the documented schema: %v\n%s", err, out.String())
	}
	return rep
}

// waitStatus reads the status until cond holds, failing after 20 s.
func waitStatus(t *testing.T, what string, read func() statusReport, cond func(statusReport) bool) statusReport {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep := read()
		if cond(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(rep, "", "  ")
			t.Fatalf("waited 20s for %s; last status:\n%s", what, b)
		}
		time.Sleep(20 * time.Millisecond) // polling the store for a condition
	}
}

// settled: every partition runs and has its checkpoint, the members own
// equal shares, and each member's Owned agrees with the status.
func (f *fleet) settled(n int) func(statusReport) bool {
	return func(rep statusReport) bool {
		if len(rep.Groups) != 1 || rep.Groups[0].Counts.Running != n || len(rep.Groups[0].Members) != len(f.members) {
			return false
		}
		for _, p := range rep.Groups[0].Partitions {
			if p.CheckpointBytes == nil {
				return false
			}
		}
		for i, ms := range rep.Groups[0].Members {
			owned := f.members[i].Owned()
			slices.SortFunc(owned, compareIDs)
			if ms.Owned != n/len(f.members) || !slices.Equal(ms.Partitions, owned) {
				return false
			}
		}
		return true
	}
}

// checkRunning checks a status of f's group where every partition runs:
// the members, their partitions (as Member.Owned says), and each
// partition's owner, epoch, checkpoint and ages.
func (f *fleet) checkRunning(rep statusReport, partitions int, started time.Time) {
	t := f.t
	t.Helper()
	g := rep.Groups[0]
	if g.Group != f.group || !g.PartitionSetStored || g.Error != nil || g.Listed != listedAll || g.NotListed != 0 {
		t.Fatalf("group status %+v; want group %q, set stored, no error, every partition listed", g, f.group)
	}
	want := statusCounts{Partitions: partitions, Running: partitions}
	if g.Counts != want {
		t.Fatalf("counts %+v; want %+v", g.Counts, want)
	}
	if len(g.Members) != len(f.members) {
		t.Fatalf("%d members listed; want %d", len(g.Members), len(f.members))
	}
	ownerOf := map[string]string{}
	total := 0
	for i, ms := range g.Members {
		m := f.members[i] // both sorted by member id
		owned := m.Owned()
		slices.SortFunc(owned, compareIDs)
		if ms.Member != m.ID() || ms.Owned != len(owned) || !slices.Equal(ms.Partitions, owned) || ms.Weight != 1 {
			t.Fatalf("member %+v; want member %q owning %q", ms, m.ID(), owned)
		}
		if ms.TTLLeftMS <= 0 || ms.TTLLeftMS > 2000 {
			t.Fatalf("member %q: ttl_remaining_ms %d; want within the 2 s TTL", ms.Member, ms.TTLLeftMS)
		}
		for _, p := range owned {
			ownerOf[p] = ms.Member
		}
		total += ms.Owned
	}
	if total != partitions {
		t.Fatalf("members own %d partitions; want %d", total, partitions)
	}
	elapsed := time.Since(started).Milliseconds() + 100
	for i, p := range g.Partitions {
		if want := fmt.Sprint(i); p.Partition != want {
			t.Fatalf("partition %d listed is %q; want %q (numeric order)", i, p.Partition, want)
		}
		switch {
		case p.State != stateRunning || !p.InSet || p.Reason != "":
			t.Fatalf("partition %+v; want running, in the set, no reason", p)
		case p.Member == nil || *p.Member != ownerOf[p.Partition]:
			t.Fatalf("partition %q owned by %v; want %q", p.Partition, p.Member, ownerOf[p.Partition])
		case p.Epoch == nil || *p.Epoch == 0 || p.Session == nil:
			t.Fatalf("partition %q: epoch %v, session %v; want both", p.Partition, p.Epoch, p.Session)
		case p.CheckpointBytes == nil || *p.CheckpointBytes != len("cp-"+p.Partition):
			t.Fatalf("partition %q: checkpoint_bytes %v; want %d", p.Partition, p.CheckpointBytes, len("cp-"+p.Partition))
		case p.SinceMS == nil || *p.SinceMS < 0 || *p.SinceMS > elapsed:
			t.Fatalf("partition %q: since_ms %v; want 0 to %d (the time since the fleet started)", p.Partition, p.SinceMS, elapsed)
		case p.CheckpointAgeMS == nil || *p.CheckpointAgeMS < 0 || *p.CheckpointAgeMS > elapsed:
			t.Fatalf("partition %q: checkpoint_age_ms %v; want 0 to %d", p.Partition, p.CheckpointAgeMS, elapsed)
		}
	}
}

// status --json against members running in this process on the in-process
// store: every field agrees with the members; after members leave, the
// partitions they held show as released with the reason.
func TestStatusJSONMemstore(t *testing.T) {
	ms := memstore.New()
	conn := &connector{scheme: "mem", mem: ms}
	const group, n = "orders", 12
	started := time.Now()
	f := startFleet(t, sharedStore{ms}, group, 3, herd.Numbered(n))
	read := func(o statusOpts) func() statusReport {
		return func() statusReport {
			return readJSON(t, func(out *bytes.Buffer) error {
				o.conn, o.json, o.interval, o.timeout, o.color = conn, true, time.Second, 5*time.Second, "never"
				return runStatus(t.Context(), out, o)
			})
		}
	}
	rep := waitStatus(t, "every partition running with its checkpoint", read(statusOpts{group: group, limit: 50}), f.settled(n))
	if rep.Store != "mem://" {
		t.Fatalf("store %q; want mem://", rep.Store)
	}
	f.checkRunning(rep, n, started)

	// Without --group: every group (one here). A limit under the set's size
	// lists only what is not running: nothing.
	rep = read(statusOpts{limit: 5})()
	if len(rep.Groups) != 1 || rep.Groups[0].Group != group {
		t.Fatalf("status without --group: %d groups; want [%s]", len(rep.Groups), group)
	}
	if g := rep.Groups[0]; g.Listed != listedNotRunning || g.NotListed != n || len(g.Partitions) != 0 || g.Members[0].Partitions != nil {
		t.Fatalf("status --limit 5 of %d running partitions: listed %q, not_listed %d, %d listed, member partitions %v; want not_running, %d, none, null",
			n, g.Listed, g.NotListed, len(g.Partitions), g.Members[0].Partitions, n)
	}

	f.leave(3)
	rep = read(statusOpts{group: group, limit: 50})()
	g := rep.Groups[0]
	if len(g.Members) != 0 || g.Counts.Released != n || g.Counts.Running != 0 {
		t.Fatalf("after every member left: %d members, counts %+v; want none, %d released", len(g.Members), g.Counts, n)
	}
	for _, p := range g.Partitions {
		if p.State != stateReleased || p.Member != nil || p.Reason != "no live member; released: waiting for a claim" || p.CheckpointBytes == nil {
			t.Fatalf("partition after the members left: %+v; want released with its checkpoint, reason naming no live member", p)
		}
	}
}

// status against members on Redis, through the command line: --json as
// above; the table aligned, with the members and a header per group; every
// group without --group; herd groups lists the group.
func TestStatusRedis(t *testing.T) {
	u, prefix, raw := redisURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := redisstore.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testStatusCLI(t, u, st)
	noKeys(t, raw, prefix)
}

// testStatusCLI runs two members of group "orders" on st, checks herd
// status (--json, the table, without --group) and herd groups against the
// store at u, which holds no other group, and deletes the group.
func testStatusCLI(t *testing.T, u string, st store.Store) {
	t.Helper()
	const group, n = "orders", 8
	started := time.Now()
	f := startFleet(t, st, group, 2, herd.Numbered(n))
	read := func(args ...string) func() statusReport {
		return func() statusReport {
			return readJSON(t, func(out *bytes.Buffer) error {
				s, err := execute(t, append([]string{"status", "--store", u, "--json"}, args...)...)
				out.WriteString(s)
				return err
			})
		}
	}
	rep := waitStatus(t, "every partition running with its checkpoint", read("--group", group), f.settled(n))
	f.checkRunning(rep, n, started)
	if rep.Store != u {
		t.Fatalf("store %q; want %q", rep.Store, u)
	}
	if rep := read()(); len(rep.Groups) != 1 || rep.Groups[0].Group != group {
		t.Fatalf("status without --group lists %d groups; want only %q (the prefix holds no other)", len(rep.Groups), group)
	}
	out, err := execute(t, "groups", "--store", u)
	if err != nil || out != group+"\n" {
		t.Fatalf("herd groups: %q, %v; want %q", out, err, group+"\n")
	}

	text, err := execute(t, "status", "--store", u, "--group", group)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, text)
	}
	checkTable(t, text, n, f)
	if strings.Contains(text, "\x1b[") {
		t.Fatalf("status to a buffer (not a terminal) is coloured:\n%q", text)
	}
	if text, _ := execute(t, "status", "--store", u, "--group", group, "--color", "always"); !strings.Contains(text, ansiGreen+"running"+ansiReset) {
		t.Fatalf("status --color always: no green running in\n%q", text)
	}
	f.leave(2)
	if _, err := execute(t, "group", "delete", "--store", u, "--group", group); err != nil {
		t.Fatal(err)
	}
}

// checkTable checks the text status of a group of n running partitions:
// the header line, the members, and that every row's cells start where
// the header's do.
func checkTable(t *testing.T, text string, n int, f *fleet) {
	t.Helper()
	lines := strings.Split(text, "\n")
	if want := fmt.Sprintf("group orders: %d partitions, %d running; %d members", n, n, len(f.members)); lines[0] != want {
		t.Fatalf("first line %q; want %q\n%s", lines[0], want, text)
	}
	tables := splitTables(text)
	if len(tables) != 2 || len(tables[0]) != 1+len(f.members) || len(tables[1]) != 1+n {
		t.Fatalf("want a member table of %d rows and a partition table of %d:\n%s", len(f.members), n, text)
	}
	for _, tb := range tables {
		checkAligned(t, tb)
	}
	for i, m := range f.members {
		if !strings.HasPrefix(tables[0][1+i], m.ID()+"  ") {
			t.Fatalf("member row %d is %q; want member %q first", i, tables[0][1+i], m.ID())
		}
	}
}
