package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// The document `herd status --json` prints, one JSON object per line (one
// line per redraw with --watch). The schema is stable: fields are added,
// never renamed or removed, and a field whose value is unknown is null, not
// left out.
//
//	{
//	  "store":  "redis://:xxxxx@redis:6379/0",    the store URL, password replaced by xxxxx
//	  "time":   "2026-11-23T10:00:00.123Z",       when the read began (local clock, RFC 3339)
//	  "groups": [ {                                one per group, sorted by id
//	    "group": "orders",
//	    "partition_set_stored": true,              false: no set is stored (never set, or lost)
//	    "counts": {
//	      "partitions": 32,                        in the partition set
//	      "running": 30,                           owned by a live session
//	      "released": 1,                           released by its owner, waiting for a claim
//	      "unowned": 1,                            no record, or its session is gone
//	      "malformed": 0,                          partition or record the store cannot decode
//	      "outside_set": 0,                        records of partitions no longer in the set
//	      "given_back": 0                          partitions of the set given back by a live session
//	    },
//	    "members": [ {                             one per live session, sorted by member then session
//	      "member": "web-1-4242",                  the member id (herd run: <hostname>-<pid> unless --member)
//	      "session": "G5TQ...",
//	      "weight": 1,
//	      "ttl_remaining_ms": 8123,                time left on the session's TTL, on the store's clock
//	      "owned": 8,                              partitions of the set its session holds
//	      "load": 2.5,                             the sum of their published loads (absent while the
//	                                               group has none)
//	      "partitions": ["0", "1"]                 those partitions, when "listed" is "all"; else null
//	    } ],
//	    "listed": "all",                           "all": every partition and record is listed;
//	                                               "not_running": only partitions of the set not running, at most --limit
//	    "not_listed": 0,                           partitions left out of "partitions"
//	    "partitions": [ {                          sorted by id, numbers in numeric order first
//	      "partition": "0",
//	      "in_set": true,                          false: a record kept for a partition removed from the set
//	      "state": "running",                      running, released, unowned or malformed
//	      "member": "web-1-4242",                  the record's owner (null unless running or owner gone)
//	      "session": "G5TQ...",                    likewise
//	      "epoch": 1766480000123456,               the record's epoch (null without a record)
//	      "load": 0.5,                             its published load (absent while none is published)
//	      "since_ms": 120345,                      time since the record got its epoch (null: unknown)
//	      "checkpoint_bytes": 12,                  size of the checkpoint (null: none)
//	      "checkpoint_age_ms": 1034,               time since it was written (null: none or unknown)
//	      "given_back_by": "web-2-77",             the member whose session gave it back (its handler kept
//	                                               failing there; herd run: --max-failures) and is still
//	                                               alive: members keep the partition off it; null if none
//	      "given_back_session": "H7QX...",         that session (null likewise)
//	      "reason": ""                             why it is not running ("" when running)
//	    } ],
//	    "malformed": [ {"kind": "ownership", "id": "7", "reason": "..."} ],
//	    "error": null,                             a read of this group that failed (the rest is then empty)
//
//	    The blackboard of a jobs group: null without --jobs. Times are UTC, RFC 3339, to the
//	    second, null when there is none; they come from the members' clocks.
//	    "jobs_counts": {
//	      "keys": 4,                               keys of the group
//	      "running": 1,                            runs under way (record running, written by the key's owner)
//	      "failed": 1,                             keys whose last run ended in an error
//	      "unowned": 0,                            keys no live member owns
//	      "unreadable": 0,                         records that are not job records
//	      "never_run": 0                           keys that never ran
//	    },
//	    "jobs_listed": "all",                      "all": every key is in "jobs"; "attention": only keys with an
//	                                               unreadable record, no owner, a run stopped mid-way or a last
//	                                               run failed or interrupted, at most --limit
//	    "jobs_not_listed": 0,                      keys left out of "jobs"
//	    "jobs": [ {                                sorted by key, numbers in numeric order first
//	      "key": "westlafcals",
//	      "owner": "web-1-4242",                   the member that owns the key now (null: none)
//	      "epoch": 1766480000123456,               its epoch for the key (null: no owner)
//	      "load": 0.25,                            its published load (absent while none is published)
//	      "record_error": null,                    why the record cannot be decoded (the fields below are then empty)
//	      "record_owner": "web-1-4242",            the member that wrote the record (null: no record)
//	      "record_epoch": 1766480000123456,        its epoch then; "running" with another epoch than "epoch":
//	                                               the writer stopped mid-run, the owner runs the slot again
//	      "record_age_ms": 1034,                   time since the record was written, on the store's clock
//	      "running": false,                        the record says a run is under way
//	      "slot": "2026-11-23T08:00:00Z",          due time of the current or last run ({slot}, HERD_SLOT)
//	      "attempt": 1,                            its attempt (more after failures and takeovers)
//	      "last_start": "2026-11-23T08:00:03Z",
//	      "last_stop": "2026-11-23T08:02:44Z",
//	      "result": "ok",                          last run ended: ok, error, interrupted (null: none yet)
//	      "error": null,                           its error text (at most 4 KiB)
//	      "next_due": "2026-11-23T16:00:03Z",      null while a run is under way; set before the first
//	      "retry": false,                          the next run is another attempt at "slot"
//	      "runs": 12, "failures": 1, "takeovers": 0, "missed": 0
//	    } ]
//	  } ]
//	}

type statusReport struct {
	Store  string        `json:"store"`
	Time   time.Time     `json:"time"`
	Groups []groupStatus `json:"groups"`
}

type groupStatus struct {
	Group              string            `json:"group"`
	Kind               string            `json:"kind"` // "partitions", "keys", or "" (not known: written by an older herd)
	PartitionSetStored bool              `json:"partition_set_stored"`
	Counts             statusCounts      `json:"counts"`
	Members            []memberStatus    `json:"members"`
	Listed             string            `json:"listed"`
	NotListed          int               `json:"not_listed"`
	Partitions         []partitionStatus `json:"partitions"`
	Malformed          []malformedStatus `json:"malformed"`
	Error              *string           `json:"error"`
	JobsCounts         *jobsCounts       `json:"jobs_counts"`
	JobsListed         *string           `json:"jobs_listed"`
	JobsNotListed      *int              `json:"jobs_not_listed"`
	Jobs               []jobStatus       `json:"jobs"`
	loads              bool              // the group has published loads: the text shows them
}

type statusCounts struct {
	Partitions int `json:"partitions"`
	Running    int `json:"running"`
	Released   int `json:"released"`
	Unowned    int `json:"unowned"`
	Malformed  int `json:"malformed"`
	OutsideSet int `json:"outside_set"`
	GivenBack  int `json:"given_back"`
}

type memberStatus struct {
	Member     string   `json:"member"`
	Session    string   `json:"session"`
	Weight     int      `json:"weight"`
	TTLLeftMS  int64    `json:"ttl_remaining_ms"`
	Owned      int      `json:"owned"`
	Partitions []string `json:"partitions"`
	// Load is the sum of the published loads of the partitions it runs
	// (absent while no load is published in the group).
	Load  *float64 `json:"load,omitempty"`
	owned []string // the partitions it owns, for the text table whatever is listed
}

type partitionStatus struct {
	Partition       string  `json:"partition"`
	InSet           bool    `json:"in_set"`
	State           string  `json:"state"`
	Member          *string `json:"member"`
	Session         *string `json:"session"`
	Epoch           *uint64 `json:"epoch"`
	SinceMS         *int64  `json:"since_ms"`
	CheckpointBytes *int    `json:"checkpoint_bytes"`
	CheckpointAgeMS *int64  `json:"checkpoint_age_ms"`
	GivenBackBy     *string `json:"given_back_by"`
	GivenBackSess   *string `json:"given_back_session"`
	// Load is the latest load published for it (ReportLoads), absent if none.
	Load   *float64 `json:"load,omitempty"`
	Reason string   `json:"reason"`
}

type malformedStatus struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// Partition states.
const (
	stateRunning   = "running"
	stateReleased  = "released"
	stateUnowned   = "unowned"
	stateMalformed = "malformed"
)

// Values of groupStatus.Listed.
const (
	listedAll        = "all"
	listedNotRunning = "not_running"
)

// statusQuery says what to read and how much to list.
type statusQuery struct {
	all   bool // --partitions: list every partition and record
	limit int  // --limit: otherwise list at most this many (all if the set is no larger)
	jobs  bool // --jobs: read the blackboard too
}

// readGroup reads one group: a snapshot for sessions, the set and the
// owners, then Records (in batches of store.MaxBatch) for the checkpoints
// and times of the partitions it lists. An error is the group's, not the
// report's.
func readGroup(ctx context.Context, st store.Store, group string, q statusQuery) groupStatus {
	gs := groupStatus{Group: group, Members: []memberStatus{}, Partitions: []partitionStatus{}, Malformed: []malformedStatus{}}
	snap, err := st.Snapshot(ctx, group)
	if err != nil {
		msg := err.Error()
		gs.Error = &msg
		if q.jobs {
			gs.Jobs = []jobStatus{}
		}
		return gs
	}
	gs.PartitionSetStored = snap.PartitionSetStored
	members := map[string]*memberStatus{} // by session
	for _, si := range snap.Sessions {
		gs.Members = append(gs.Members, memberStatus{Member: si.Member, Session: si.ID, Weight: max(si.Weight, 1), TTLLeftMS: si.Remaining.Milliseconds()})
	}
	gs.loads = len(snap.Loads) > 0
	for i := range gs.Members {
		members[gs.Members[i].Session] = &gs.Members[i]
		if gs.loads {
			gs.Members[i].Load = ptr(0.0)
		}
	}
	badRecord := map[string]string{} // partition -> reason, malformed ownership records
	for _, m := range snap.Malformed {
		gs.Malformed = append(gs.Malformed, malformedStatus{Kind: m.Kind, ID: m.ID, Reason: m.Reason})
		if m.Kind == store.MalformedOwnership {
			badRecord[m.ID] = m.Reason
		}
	}
	owners := make(map[string]store.Ownership, len(snap.Owners))
	for _, o := range snap.Owners {
		owners[o.Partition] = o
	}
	inSet := make(map[string]bool, len(snap.Partitions))
	var all []partitionStatus
	for _, p := range snap.Partitions {
		inSet[p.ID] = true
		all = append(all, partitionOf(p.ID, true, owners, badRecord, snap, members))
	}
	// Partitions whose set entry is malformed: in the set, never placed.
	for _, m := range snap.Malformed {
		if m.Kind == store.MalformedPartition && !inSet[m.ID] {
			inSet[m.ID] = true
			all = append(all, partitionStatus{Partition: m.ID, InSet: true, State: stateMalformed,
				Reason: "malformed partition set entry (" + m.Reason + "): no member places it until it is repaired"})
		}
	}
	var outside []partitionStatus
	for _, o := range snap.Owners {
		if !inSet[o.Partition] {
			outside = append(outside, partitionOf(o.Partition, false, owners, badRecord, snap, members))
		}
	}
	for id := range badRecord {
		if !inSet[id] {
			outside = append(outside, partitionOf(id, false, owners, badRecord, snap, members))
		}
	}
	gs.count(all, outside)
	gs.list(all, outside, members, q)
	if err := addRecords(ctx, st, group, gs.Partitions); err != nil {
		msg := err.Error()
		gs.Error = &msg
	}
	gs.Kind = snap.Kind
	if showsJobs(snap.Kind, q.jobs) {
		addJobs(ctx, st, &gs, q, snap)
	}
	slices.SortFunc(gs.Members, func(a, b memberStatus) int {
		if c := strings.Compare(a.Member, b.Member); c != 0 {
			return c
		}
		return strings.Compare(a.Session, b.Session)
	})
	return gs
}

// count counts the partitions of the set (all) by state, and those outside it.
func (gs *groupStatus) count(all, outside []partitionStatus) {
	for _, p := range all {
		gs.Counts.Partitions++
		switch p.State {
		case stateRunning:
			gs.Counts.Running++
		case stateReleased:
			gs.Counts.Released++
		case stateUnowned:
			gs.Counts.Unowned++
		case stateMalformed:
			gs.Counts.Malformed++
		}
		if p.GivenBackBy != nil {
			gs.Counts.GivenBack++
		}
	}
	gs.Counts.OutsideSet = len(outside)
}

// list chooses the partitions to list (all of them, or up to q.limit of
// those not running) and each member's, sorted.
func (gs *groupStatus) list(all, outside []partitionStatus, members map[string]*memberStatus, q statusQuery) {
	sortPartitions(all)
	sortPartitions(outside)
	for _, p := range all {
		if m := members[ptrVal(p.Session)]; m != nil && p.State == stateRunning {
			m.owned = append(m.owned, p.Partition)
		}
	}
	switch {
	case q.all || len(all)+len(outside) <= q.limit:
		gs.Listed = listedAll
		gs.Partitions = append(all, outside...)
		for i := range gs.Members {
			gs.Members[i].Partitions = append([]string{}, gs.Members[i].owned...)
		}
	default:
		gs.Listed = listedNotRunning
		for _, p := range all {
			if p.State != stateRunning && len(gs.Partitions) < q.limit {
				gs.Partitions = append(gs.Partitions, p)
			}
		}
		gs.NotListed = len(all) + len(outside) - len(gs.Partitions)
	}
}

// showsJobs says whether a group of kind is shown as a jobs group: a group
// of keys always is; with --jobs, one whose kind is not known (written by
// an older herd) too; a group of partitions never, since its records are
// not job records and would read as malformed ones.
func showsJobs(kind string, jobsFlag bool) bool {
	return kind == store.KindKeys || jobsFlag && kind == ""
}
