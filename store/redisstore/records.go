package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/herdhq/herd/store"
)

// Records implements store.Store: one read-only script (HMGET of the
// owners, checkpoints, epochat, ckptat and givenback hashes, and the
// server's time), so the records, their GivenBack marks and their ages are
// one consistent read. It expires no session and logs nothing. A record whose owners value does not decode is
// left out, as Snapshot leaves it out (and lists it in Malformed). A time
// that is missing (a record written by a version that predates the time
// keys) or does not decode is reported as 0, unknown; so is the claim time
// of an epoch other than the record's (a claim by such a version).
//
// The checkpoints come back with the records: a batch of MaxBatch
// partitions with megabyte checkpoints is a reply of up to a gigabyte. A
// caller that expects large checkpoints asks for fewer partitions at once.
func (s *Store) Records(ctx context.Context, group string, partitions []string) ([]store.Record, error) {
	if err := s.begin(ctx, "Records", store.ValidateRecords(group, partitions)); err != nil {
		return nil, err
	}
	if len(partitions) == 0 {
		return []store.Record{}, nil
	}
	k := s.keys(group)
	args := make([]any, len(partitions))
	for i, p := range partitions {
		args[i] = p
	}
	res, err := s.eval(ctx, recordsScript, []string{k.owners, k.checkpoints, k.epochat, k.ckptat, k.givenback}, args...)
	if err != nil {
		return nil, fail("Records", err)
	}
	return decodeRecords(partitions, res)
}

// decodeRecords decodes the records script's reply for partitions.
func decodeRecords(partitions []string, res []any) ([]store.Record, error) {
	if len(res) != 6 {
		return nil, fmt.Errorf("redisstore: Records: script reply has %d elements, want 6", len(res))
	}
	now, err := strconv.ParseInt(str(res, 0), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisstore: Records: bad server time %q", str(res, 0))
	}
	var cols [5][]any
	for i := range cols {
		cols[i], _ = res[i+1].([]any)
		if len(cols[i]) != len(partitions) {
			return nil, fmt.Errorf("redisstore: Records: script reply has %d values for %d partitions", len(cols[i]), len(partitions))
		}
	}
	owners, ckpts, epochAt, ckptAt, marks := cols[0], cols[1], cols[2], cols[3], cols[4]
	out := make([]store.Record, 0, len(partitions))
	for i, p := range partitions {
		v, ok := owners[i].(string)
		if !ok {
			continue // no record
		}
		epoch, session, member, bad := parseRecord(v)
		if bad != "" {
			continue // malformed: Snapshot lists it
		}
		r := store.Record{Ownership: store.Ownership{Partition: p, Session: session, Member: member, Epoch: epoch}}
		r.Checkpoint = bytesAt(ckpts, i)
		r.GivenBack = mark(str(marks, i))
		if at, ok := epochAt[i].(string); ok {
			e, us, found := strings.Cut(at, ":")
			if found && e == strconv.FormatUint(epoch, 10) {
				r.Since = age(now, us)
			}
		}
		if r.Checkpoint != nil {
			if us, ok := ckptAt[i].(string); ok {
				r.CheckpointAge = age(now, us)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// age is the time from the server time at (µs, decimal) to now (µs); 0 if
// at does not decode, and never negative.
func age(now int64, at string) time.Duration {
	if !allDigits(at) {
		return 0
	}
	t, err := strconv.ParseInt(at, 10, 64)
	if err != nil || t > now {
		return 0
	}
	return time.Duration(now-t) * time.Microsecond
}
