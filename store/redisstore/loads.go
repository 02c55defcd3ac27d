package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/herdhq/herd/store"
)

// reportLoadsScript sets each load in the loads hash and appends the
// report's entry, "L\n<session>(\n<partition>\n<load>)+", if the session
// is alive. It neither prunes nor expires: a report is not a decision.
// KEYS: sessions, loads. ARGV: session, the entry, then partition, load
// pairs.
var reportLoadsScript = logged(`
if not alive(KEYS[1], ARGV[1]) then return {'expired'} end
for i = 3, NARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
append(ARGV[2])
return {'ok'}
`)

// ReportLoads implements store.Store: one script.
func (s *Store) ReportLoads(ctx context.Context, group, session string, loads []store.Load) error {
	if err := s.begin(ctx, "ReportLoads", store.ValidateReportLoads(group, session, loads)); err != nil {
		return err
	}
	c := store.ReportChange(session, loads)
	var e strings.Builder
	e.WriteString("L\n" + session)
	args := make([]any, 0, 2+2*len(c.Loads))
	args = append(args, session, "")
	for _, l := range c.Loads {
		v := store.FormatLoad(l.Load)
		e.WriteString("\n" + l.Partition + "\n" + v)
		args = append(args, l.Partition, v)
	}
	args[1] = e.String()
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "ReportLoads", reportLoadsScript, k, []string{k.sessions, k.loads}, args...)
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "expired":
		return fmt.Errorf("redisstore: ReportLoads by session %q: %w", session, store.ErrSessionExpired)
	}
	return unexpected("ReportLoads", status)
}

// decodeLoadsEntry decodes the fields of a report's entry after "L\n".
func decodeLoadsEntry(v string) (session string, loads []store.Load, ok bool) {
	f := strings.Split(v, "\n")
	if len(f) < 3 || len(f)%2 != 1 || f[0] == "" {
		return "", nil, false
	}
	loads = make([]store.Load, 0, len(f)/2)
	for i := 1; i < len(f); i += 2 {
		l, err := store.ParseLoad(f[i+1])
		if err != nil || f[i] == "" {
			return "", nil, false
		}
		loads = append(loads, store.Load{Partition: f[i], Load: l})
	}
	store.SortLoads(loads)
	return f[0], loads, true
}

// decodeLoads decodes the loads hash as Snapshot read it; a value that is
// not a load (written by something else) is left out.
func decodeLoads(h map[string]string) []store.Load {
	if len(h) == 0 {
		return nil
	}
	out := make([]store.Load, 0, len(h))
	for p, v := range h {
		if l, err := store.ParseLoad(v); err == nil {
			out = append(out, store.Load{Partition: p, Load: l})
		}
	}
	store.SortLoads(out)
	return out
}
