package netpart

import (
	"strings"
	"testing"
	"time"
)

func TestParsePgLine(t *testing.T) {
	l, ok := parsePgLine("2026-11-27 19:05:01.123 UTC [4242] 10.213.7.2 herd tie 5f3a: LOG:  disconnection: session time: 0:00:12.345 user=postgres")
	want := time.Date(2026, 11, 27, 19, 5, 1, 123e6, time.UTC)
	if !ok || !l.T.Equal(want) || l.PID != 4242 || l.Host != "10.213.7.2" || l.App != "herd tie 5f3a" || !strings.HasPrefix(l.Msg, "LOG:  disconnection:") {
		t.Fatalf("parsed %+v, %v", l, ok)
	}
	if _, ok := parsePgLine("\tat a continuation line"); ok {
		t.Error("a continuation line parsed")
	}
}

// A long cut passes when the member fenced before the server dropped its
// tie, and fails when the server did not drop it, or dropped it first.
func TestCheckTieEnds(t *testing.T) {
	cut := Fault{Kind: LongCut, Member: 1, Start: at(1000), End: at(15000)}
	cases := []struct {
		name string
		end  TieEnd
		want string
	}{
		{"fenced first", TieEnd{Fenced: at(3000), Dropped: at(11000)}, ""},
		{"not dropped", TieEnd{Fenced: at(3000)}, "did not end member 1's tied connection"},
		{"dropped first", TieEnd{Fenced: at(11500), Dropped: at(11000)}, "after the server ended"},
		{"never fenced", TieEnd{Dropped: at(11000)}, "fenced itself - ms"},
	}
	for _, c := range cases {
		h := &History{Faults: []Fault{cut}, TieEnds: map[int]TieEnd{0: c.end}}
		v, figs := CheckTieEnds(h)
		if len(figs) != 1 {
			t.Errorf("%s: figures %v, want one line", c.name, figs)
		}
		if c.want == "" && len(v) != 0 || c.want != "" && (len(v) != 1 || !strings.Contains(v[0], c.want)) {
			t.Errorf("%s: violations %v, want %q", c.name, v, c.want)
		}
	}
}
