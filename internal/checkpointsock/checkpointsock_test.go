package checkpointsock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	var mu sync.Mutex
	saved := map[string][]byte{}
	s, err := Listen(func(_ context.Context, part string, epoch uint64, v []byte) Reply {
		switch {
		case epoch == 9:
			return Reply{Err: errors.New("store down\nsecond line")}
		case epoch != 7:
			return Reply{Fenced: true, Current: 7}
		}
		mu.Lock()
		saved[part] = v
		mu.Unlock()
		return Reply{}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	value := []byte("a\x00b\nc")
	if rep, err := Checkpoint(ctx, s.Path(), "city of x", 7, value); err != nil || rep.Fenced || rep.Err != nil {
		t.Fatalf("save: %+v, %v; want ok", rep, err)
	}
	if got := saved["city of x"]; string(got) != string(value) {
		t.Fatalf("saved %q; want %q", got, value)
	}
	if rep, err := Checkpoint(ctx, s.Path(), "city of x", 6, nil); err != nil || !rep.Fenced || rep.Current != 7 {
		t.Fatalf("stale epoch: %+v, %v; want fenced 7", rep, err)
	}
	if rep, err := Checkpoint(ctx, s.Path(), "p", 9, nil); err != nil || rep.Err == nil || rep.Err.Error() != "store down second line" {
		t.Fatalf("error: %+v, %v; want the error on one line", rep, err)
	}
	if rep, err := Checkpoint(ctx, s.Path(), "", 7, nil); err != nil || rep.Err == nil {
		t.Fatalf("no partition: %+v, %v; want an error answer", rep, err)
	}
}

// A client in any language speaks it directly: raw lines on a connection,
// several requests on one connection, malformed ones answered with error.
func TestRawLines(t *testing.T) {
	s, err := Listen(func(context.Context, string, uint64, []byte) Reply { return Reply{} })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, tc := range []struct{ req, want string }{
		{"checkpoint 3 aGVsbG8= p 1\n", "ok\n"},
		{"checkpoint 3  p\n", "ok\n"},
		{"checkpoint x aGVsbG8= p\n", "error "},
		{"checkpoint 3 !!! p\n", "error "},
		{"save 3 aGVsbG8= p\n", "error "},
	} {
		if _, err := c.Write([]byte(tc.req)); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, tc.want) {
			t.Fatalf("%q: answer %q, %v; want %q...", tc.req, got, err, tc.want)
		}
	}
}

func TestParseRequest(t *testing.T) {
	p, e, v, err := ParseRequest(strings.TrimSuffix(FormatRequest("a b", 42, []byte{0, 1, 2}), "\n"))
	if err != nil || p != "a b" || e != 42 || string(v) != "\x00\x01\x02" {
		t.Fatalf("got %q %d %q %v", p, e, v, err)
	}
}
