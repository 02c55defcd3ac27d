package netpart

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ChildScript is the command every member runs per partition (bash, for
// $EPOCHREALTIME). It appends one line per event to $NETPART_LOG, a file
// per member, with the wall clock in microseconds (one clock: namespaces
// share it):
//
//	start   PARTITION EPOCH PID T CHECKPOINT
//	cp      PARTITION EPOCH PID T VALUE SENT RC   (RC of herd checkpoint: 0 saved, 3 fenced, else error)
//	stop    PARTITION EPOCH PID T                 (SIGTERM)
//	exit    PARTITION EPOCH PID T                 (after a fenced checkpoint)
//	overlap PARTITION EPOCH PID T                 (another live child holds the lock)
//	freed   PARTITION EPOCH PID T                 (after an overlap: when the lock was freed)
//
// It holds an exclusive flock on $NETPART_DIR/lock.PARTITION for as long
// as any process of its group lives (the descriptor is inherited), so a
// second live child of one partition, on any member, finds it taken. A
// child killed with SIGKILL writes nothing; the lock is the record that
// it was gone.
const ChildScript = `
now() { local t=${EPOCHREALTIME/./}; t=${t/,/}; echo "$t"; }
id="$HERD_PARTITION $HERD_EPOCH $$"
exec 9>"$NETPART_DIR/lock.$HERD_PARTITION"
if ! flock -n 9; then
  echo "overlap $id $(now)" >> "$NETPART_LOG"
  flock -w 10 9 && echo "freed $id $(now)" >> "$NETPART_LOG"
  exit 1
fi
n=${HERD_CHECKPOINT:-0}
echo "start $id $(now) $n" >> "$NETPART_LOG"
trap 'echo "stop $id $(now)" >> "$NETPART_LOG"; exit 0' TERM
while :; do
  n=$((n+1))
  sent=$(now)
  herd checkpoint --timeout 3s "$n" >/dev/null 2>&1; rc=$?
  echo "cp $id $(now) $n $sent $rc" >> "$NETPART_LOG"
  if [ $rc = 3 ]; then echo "exit $id $(now)" >> "$NETPART_LOG"; exit 0; fi
  sleep 0.2 & wait $!
done
`

// Event is one line of a member's log.
type Event struct {
	Kind      string // start, cp, stop, exit, overlap, freed
	Member    int
	Partition string
	Epoch     uint64
	PID       int
	T         time.Time
	Value     uint64    // start: the checkpoint it began from; cp: the value
	Sent      time.Time // cp: when herd checkpoint was started
	RC        int       // cp: herd checkpoint's exit status
}

// Saved says whether e is a checkpoint the store accepted.
func (e Event) Saved() bool { return e.Kind == "cp" && e.RC == 0 }

func (e Event) String() string {
	s := fmt.Sprintf("%s p=%s m%d epoch=%d pid=%d t=%s", e.Kind, e.Partition, e.Member, e.Epoch, e.PID, e.T.Format("15:04:05.000000"))
	switch e.Kind {
	case "start":
		s += fmt.Sprintf(" from=%d", e.Value)
	case "cp":
		s += fmt.Sprintf(" value=%d sent=%s rc=%d", e.Value, e.Sent.Format("15:04:05.000000"), e.RC)
	}
	return s
}

// ReadLog parses member's log file; a line cut short (the member killed
// while writing it) is skipped.
func ReadLog(path string, member int) ([]Event, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netpart: read log: %w", err)
	}
	defer f.Close()
	var evs []Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if e, ok := parseLine(sc.Text(), member); ok {
			evs = append(evs, e)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("netpart: read log %s: %w", path, err)
	}
	return evs, nil
}

func parseLine(line string, member int) (Event, bool) {
	f := strings.Fields(line)
	want := map[string]int{"start": 6, "cp": 8, "stop": 5, "exit": 5, "overlap": 5, "freed": 5}
	if len(f) < 2 || want[f[0]] == 0 || len(f) != want[f[0]] {
		return Event{}, false
	}
	e := Event{Kind: f[0], Member: member, Partition: f[1]}
	var errs [6]error
	e.Epoch, errs[0] = strconv.ParseUint(f[2], 10, 64)
	e.PID, errs[1] = strconv.Atoi(f[3])
	e.T, errs[2] = micros(f[4])
	if e.Kind == "start" || e.Kind == "cp" {
		e.Value, errs[3] = strconv.ParseUint(f[5], 10, 64)
	}
	if e.Kind == "cp" {
		e.Sent, errs[4] = micros(f[6])
		e.RC, errs[5] = strconv.Atoi(f[7])
	}
	for _, err := range errs {
		if err != nil {
			return Event{}, false
		}
	}
	return e, true
}

func micros(s string) (time.Time, error) {
	us, err := strconv.ParseInt(s, 10, 64)
	return time.UnixMicro(us), err
}

// SortEvents orders events by time, ties by member.
func SortEvents(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if !evs[i].T.Equal(evs[j].T) {
			return evs[i].T.Before(evs[j].T)
		}
		return evs[i].Member < evs[j].Member
	})
}
