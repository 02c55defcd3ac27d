package checkpointsock

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// Fuzz targets of the socket's line protocol: what a child sends (requests,
// any bytes on a connection) and what it reads back (docs/fuzzing.md).

// FuzzRequests reads a connection's bytes as the server does, one line at
// a time, and parses each: no panic, no line longer than the limit, and a
// request that parses is written back by FormatRequest as a line that
// parses the same.
func FuzzRequests(f *testing.F) {
	f.Add([]byte(FormatRequest("p 1", 7, []byte("state")) + FormatRequest("q", 1, nil)))
	f.Add([]byte("checkpoint 5 !!! p\n"))
	f.Add([]byte("checkpoint 5 c3RhdGU= \n"))
	f.Add([]byte("checkpoint 18446744073709551616 YQ== p\nok"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for {
			line, err := readLine(r)
			if err != nil {
				if err != io.EOF && !errors.Is(err, errLong) {
					t.Fatalf("readLine: %v", err)
				}
				return
			}
			if len(line) > maxLine || strings.Contains(line, "\n") {
				t.Fatalf("readLine returned %d bytes: %.40q", len(line), line)
			}
			part, epoch, value, err := ParseRequest(line)
			if err != nil {
				continue
			}
			again := FormatRequest(part, epoch, value)
			p2, e2, v2, err := ParseRequest(strings.TrimSuffix(again, "\n"))
			if err != nil || p2 != part || e2 != epoch || !bytes.Equal(v2, value) || strings.Count(again, "\n") != 1 {
				t.Fatalf("ParseRequest(%q) = %q %d %q; written back as %q: %q %d %q %v", line, part, epoch, value, again, p2, e2, v2, err)
			}
		}
	})
}

// FuzzReply parses an answer line: one that parses is written back by
// FormatReply as one line that parses the same.
func FuzzReply(f *testing.F) {
	for _, s := range []string{"ok", "fenced 9", "fenced 0", "error the store did not answer", "fenced", "fenced -1", "okay", "error "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.Contains(line, "\n") {
			return // readLine never returns one
		}
		rep, err := ParseReply(line)
		if err != nil {
			return
		}
		again := FormatReply(rep)
		got, err := ParseReply(strings.TrimSuffix(again, "\n"))
		if err != nil || got.Fenced != rep.Fenced || got.Current != rep.Current || (got.Err == nil) != (rep.Err == nil) ||
			strings.Count(again, "\n") != 1 {
			t.Fatalf("ParseReply(%q) = %+v; written back as %q: %+v, %v", line, rep, again, got, err)
		}
	})
}
