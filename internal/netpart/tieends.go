package netpart

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// pgLogLinePrefix stamps each line of the run's PostgreSQL log with the
// time (UTC, milliseconds), the backend's pid, the client's address and
// its application_name, which names a tied connection ("herd tie <id>").
const pgLogLinePrefix = "%m [%p] %h %a: "

// pgLogTime is the layout of %m with log_timezone=UTC.
const pgLogTime = "2006-01-02 15:04:05.000 MST"

// PgLine is one line of the run's PostgreSQL log.
type PgLine struct {
	T    time.Time
	PID  int
	Host string // the client's address
	App  string // its application_name
	Msg  string // the rest: "LOG:  disconnection: ..."
}

// ReadPgLog reads the lines of a PostgreSQL log written with
// pgLogLinePrefix; lines of another shape are skipped.
func ReadPgLog(path string) ([]PgLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("netpart: the postgres log: %w", err)
	}
	defer f.Close()
	var ls []PgLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l, ok := parsePgLine(sc.Text()); ok {
			ls = append(ls, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("netpart: reading %s: %w", path, err)
	}
	return ls, nil
}

func parsePgLine(s string) (PgLine, bool) {
	if len(s) < len(pgLogTime)+3 {
		return PgLine{}, false
	}
	t, err := time.Parse(pgLogTime, s[:len(pgLogTime)])
	if err != nil {
		return PgLine{}, false
	}
	rest := strings.TrimPrefix(s[len(pgLogTime):], " [")
	pid, rest, ok := strings.Cut(rest, "] ")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil {
		return PgLine{}, false
	}
	host, rest, _ := strings.Cut(rest, " ")
	app, msg, ok := strings.Cut(rest, ": ")
	if !ok {
		return PgLine{}, false
	}
	return PgLine{T: t, PID: n, Host: host, App: app, Msg: msg}, true
}

// TieEnd is what the logs say of one LongCut on PostgreSQL: when the
// server ended the cut member's tied connection, why (the backend's last
// line before its disconnection), and when the member fenced itself (its
// first "session lost" line in the cut; zero: none).
type TieEnd struct {
	Dropped time.Time // zero: the server did not end it during the cut
	Why     string
	Fenced  time.Time
}

// tieEnds reads, for each LongCut of faults, the server's and the cut
// member's logs in dir. A member's tied connection comes from nsAddrs[i].
func tieEnds(dir string, faults []Fault, nsAddrs []string) (map[int]TieEnd, error) {
	ls, err := ReadPgLog(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	ends := map[int]TieEnd{}
	for i, f := range faults {
		if f.Kind != LongCut {
			continue
		}
		var e TieEnd
		last := map[int]string{}
		for _, l := range ls {
			if l.T.Before(f.Start) || l.T.After(f.End) || l.Host != nsAddrs[f.Member] || !strings.HasPrefix(l.App, "herd tie ") {
				continue
			}
			if strings.Contains(l.Msg, "disconnection:") {
				if e.Dropped.IsZero() {
					e.Dropped, e.Why = l.T, last[l.PID]
				}
				continue
			}
			last[l.PID] = l.Msg
		}
		e.Fenced, err = firstLine(filepath.Join(dir, fmt.Sprintf("m%d.out", f.Member)), "session lost", f.Start, f.End)
		if err != nil {
			return nil, err
		}
		ends[i] = e
	}
	return ends, nil
}

// firstLine is the time of the first line of a herd run log (slog text)
// within [from, to] that contains text; zero: none.
func firstLine(path, text string, from, to time.Time) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("netpart: a member's output: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if !strings.HasPrefix(s, "time=") || !strings.Contains(s, text) {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(s, "time="), " ")
		t, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil && !t.Before(from) && !t.After(to) {
			return t, nil
		}
	}
	return time.Time{}, sc.Err()
}

// CheckTieEnds: in every LongCut on PostgreSQL the server ended the cut
// member's tied connection (else the cut tested nothing of it), and the
// member fenced itself before (docs/takeover.md's argument). It returns
// the violations and one line of figures per LongCut.
func CheckTieEnds(h *History) (v, figs []string) {
	for i, f := range h.Faults {
		e, ok := h.TieEnds[i]
		if !ok {
			continue
		}
		since := func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return strconv.FormatInt(t.Sub(f.Start).Milliseconds(), 10)
		}
		figs = append(figs, fmt.Sprintf("member=%d hold_ms=%d fenced_ms=%s tie_dropped_ms=%s why=%q",
			f.Member, f.End.Sub(f.Start).Milliseconds(), since(e.Fenced), since(e.Dropped), e.Why))
		switch {
		case e.Dropped.IsZero():
			v = append(v, fmt.Sprintf("the server did not end member %d's tied connection during its cut (%s at %s): the cut tested nothing of it",
				f.Member, f, f.Start.Format("15:04:05.000")))
		case e.Fenced.IsZero() || e.Fenced.After(e.Dropped):
			v = append(v, fmt.Sprintf("member %d fenced itself %s ms into its cut (%s at %s), after the server ended its tied connection %s ms into it",
				f.Member, since(e.Fenced), f, f.Start.Format("15:04:05.000"), since(e.Dropped)))
		}
	}
	return v, figs
}
