package herd

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A log line lists the first few partition ids, each cut short: no line
// grows with their number or length.
const (
	maxListedIDs   = 10
	maxListedBytes = 100 // the listed ids together
	maxIDBytes     = 24  // one listed id
)

// idList counts partition ids and keeps the first few, for a log line.
type idList struct {
	n     int
	ids   []string
	bytes int
}

func (l *idList) add(id string) {
	l.n++
	if len(l.ids) >= maxListedIDs || l.bytes >= maxListedBytes {
		return
	}
	if len(id) > maxIDBytes {
		cut := maxIDBytes
		for cut > 0 && !utf8.RuneStart(id[cut]) {
			cut--
		}
		id = id[:cut] + "…"
	}
	if l.bytes+len(id) > maxListedBytes {
		l.bytes = maxListedBytes // list no more, so the order stays that of add
		return
	}
	l.ids = append(l.ids, id)
	l.bytes += len(id) + 1
}

// String lists the kept ids, and how many more there are.
func (l *idList) String() string {
	s := strings.Join(l.ids, " ")
	if more := l.n - len(l.ids); more > 0 {
		s += " … and " + strconv.Itoa(more) + " more"
	}
	return s
}

// listIDs is an idList of ids, for a log line or an error message.
func listIDs(ids []string) string {
	var l idList
	for _, id := range ids {
		l.add(id)
	}
	return strconv.Itoa(l.n) + " partitions: " + l.String()
}

// stepLog sums up one rebalance step of a member (claimed, handed off,
// lost) for one line of counts and, at DEBUG, one line of ids per kind.
type stepLog struct {
	start                  time.Time // when the first partition was counted; zero: nothing to log
	claimed, handoff, lost idList
	minEpoch, maxEpoch     uint64 // of the claims
}

func (s *stepLog) begin() {
	if s.start.IsZero() {
		s.start = time.Now()
	}
}

func (s *stepLog) claim(p string, epoch uint64) {
	s.begin()
	s.claimed.add(p)
	if s.minEpoch == 0 || epoch < s.minEpoch {
		s.minEpoch = epoch
	}
	s.maxEpoch = max(s.maxEpoch, epoch)
}

func (s *stepLog) handingOff(p string) { s.begin(); s.handoff.add(p) }
func (s *stepLog) dropLost(p string)   { s.begin(); s.lost.add(p) }

// stepWait is how long a step's line waits for partitions still coming.
const stepWait = time.Second

// logStep logs the step and starts a new one, unless partitions the last
// plan gave this member are on their way (up to stepWait).
func (m *Member) logStep() {
	s := &m.planner.step
	if s.start.IsZero() || (m.planner.incoming > 0 && time.Since(s.start) < stepWait) {
		return
	}
	s.write(m.log, m.ownedCount())
	m.metrics.Step(s.claimed.n, s.handoff.n, s.lost.n, s.start)
	*s = stepLog{}
}

// write logs the step: one line of counts, then the ids at DEBUG.
func (s *stepLog) write(log *slog.Logger, owned int) {
	level := slog.LevelInfo
	if s.lost.n > 0 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.Int("claimed", s.claimed.n), slog.Int("handed_off", s.handoff.n), slog.Int("lost", s.lost.n),
		slog.Int("owned", owned),
	}
	if s.claimed.n > 0 {
		epochs := strconv.FormatUint(s.minEpoch, 10)
		if s.maxEpoch != s.minEpoch {
			epochs += "-" + strconv.FormatUint(s.maxEpoch, 10)
		}
		attrs = append(attrs, slog.String("epochs", epochs))
	}
	attrs = append(attrs, slog.Duration("took", time.Since(s.start).Round(time.Millisecond)))
	ctx := context.Background()
	log.LogAttrs(ctx, level, "rebalanced", attrs...)
	if !log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	for _, k := range []struct {
		msg string
		l   *idList
	}{{"claimed partitions", &s.claimed}, {"handing off partitions", &s.handoff}, {"lost partitions to other members", &s.lost}} {
		if k.l.n > 0 {
			log.LogAttrs(ctx, slog.LevelDebug, k.msg, slog.Int("count", k.l.n), slog.String("ids", k.l.String()))
		}
	}
}
