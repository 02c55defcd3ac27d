// Package checkpointsock is the protocol by which a child of herd run saves
// its partition's checkpoint without any library, as systemd's sd_notify
// does: a private Unix socket named in the child's environment, one line
// per request, one line per answer.
//
// The child's environment holds HERD_SOCKET (the socket's path),
// HERD_PARTITION and HERD_EPOCH. A request is one line (a stream socket;
// several requests may follow each other on one connection):
//
//	checkpoint <epoch> <value, standard base64 with padding, empty for none> <partition>\n
//
// The partition is the rest of the line (ids may hold spaces, never a
// control character). The answer is one line:
//
//	ok\n                  saved
//	fenced <epoch>\n      not saved: the partition has moved on; <epoch>
//	                      is its current epoch as far as the member knows
//	                      (0: unknown, or the member no longer owns it)
//	error <text>\n        not saved, for another reason (the store did
//	                      not answer in time, a malformed request); the
//	                      child may try again
//
// From a shell, without herd on the PATH:
//
//	printf 'checkpoint %s %s %s\n' "$HERD_EPOCH" "$(printf %s "$v" | base64 -w0)" "$HERD_PARTITION" |
//	  nc -UN "$HERD_SOCKET"
package checkpointsock

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Environment variables a child gets.
const (
	EnvSocket    = "HERD_SOCKET"
	EnvPartition = "HERD_PARTITION"
	EnvEpoch     = "HERD_EPOCH"
)

// MaxValue is the longest value a request may carry (the store's limit).
const MaxValue = 1 << 20

// maxLine bounds a request line: the base64 of MaxValue, an epoch, a
// partition id and the words.
var maxLine = base64.StdEncoding.EncodedLen(MaxValue) + 4096

// ioTimeout bounds reading a request and writing its answer.
const ioTimeout = 30 * time.Second

// Reply is the answer to one request.
type Reply struct {
	// Fenced: not saved, the partition has moved on (see Current).
	Fenced bool
	// Current is the partition's current epoch if Fenced, 0 if unknown.
	Current uint64
	// Err, if not nil and not Fenced: why nothing was saved.
	Err error
}

// Saver saves one checkpoint. It is called on the connection's goroutine;
// ctx ends when the server closes.
type Saver func(ctx context.Context, partition string, epoch uint64, value []byte) Reply

// Server listens on a Unix socket in a private directory.
type Server struct {
	dir  string
	path string
	ln   net.Listener
	save Saver

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the accept loop and every connection
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// Listen creates a directory only this user may enter (mode 0700) under
// the system's temporary directory, listens on a socket in it, and serves
// requests with save until Close.
func Listen(save Saver) (*Server, error) {
	// Socket paths are limited to about 100 bytes: keep it short, under
	// /tmp, whatever TMPDIR is (a test's TMPDIR is long).
	base := os.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "herd-run-")
	if err != nil {
		return nil, fmt.Errorf("checkpoint socket: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("checkpoint socket: %w", err)
	}
	path := filepath.Join(dir, "checkpoint.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("checkpoint socket: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{dir: dir, path: path, ln: ln, save: save, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Path is the socket's path, for HERD_SOCKET.
func (s *Server) Path() string { return s.path }

// Close stops serving, waits for the connections' goroutines and removes
// the directory.
func (s *Server) Close() error {
	s.cancel()
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: let it pass
			continue
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	for {
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, errLong) {
				_, _ = c.Write([]byte("error request longer than " + strconv.Itoa(maxLine) + " bytes\n"))
			}
			return
		}
		var rep Reply
		part, epoch, value, err := ParseRequest(line)
		if err != nil {
			rep.Err = err
		} else {
			rep = s.save(s.ctx, part, epoch, value)
		}
		_ = c.SetDeadline(time.Now().Add(ioTimeout))
		if _, err := c.Write([]byte(FormatReply(rep))); err != nil {
			return
		}
	}
}

var errLong = errors.New("line too long")

// readLine reads one line without its newline, at most maxLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxLine {
			return "", errLong
		}
		switch {
		case err == nil:
			return string(b[:len(b)-1]), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return "", err
		}
	}
}

// FormatRequest is the request line (with its newline) for a checkpoint.
func FormatRequest(partition string, epoch uint64, value []byte) string {
	return "checkpoint " + strconv.FormatUint(epoch, 10) + " " + base64.StdEncoding.EncodeToString(value) + " " + partition + "\n"
}

// ParseRequest parses a request line (without its newline).
func ParseRequest(line string) (partition string, epoch uint64, value []byte, err error) {
	f := strings.SplitN(line, " ", 4)
	if len(f) != 4 || f[0] != "checkpoint" {
		return "", 0, nil, errors.New(`malformed request; want "checkpoint <epoch> <base64 value> <partition>"`)
	}
	epoch, err = strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return "", 0, nil, fmt.Errorf("malformed epoch %q", f[1])
	}
	value, err = base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		return "", 0, nil, errors.New("the value is not standard base64 (with padding)")
	}
	if len(value) > MaxValue {
		return "", 0, nil, fmt.Errorf("the value is %d bytes, over the limit of %d", len(value), MaxValue)
	}
	if f[3] == "" {
		return "", 0, nil, errors.New("no partition")
	}
	return f[3], epoch, value, nil
}

// FormatReply is the answer line (with its newline) for rep.
func FormatReply(rep Reply) string {
	switch {
	case rep.Fenced:
		return "fenced " + strconv.FormatUint(rep.Current, 10) + "\n"
	case rep.Err != nil:
		// One line: the text must not break the protocol.
		return "error " + strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, rep.Err.Error()) + "\n"
	}
	return "ok\n"
}

// ParseReply parses an answer line (without its newline).
func ParseReply(line string) (Reply, error) {
	switch word, rest, _ := strings.Cut(line, " "); word {
	case "ok":
		return Reply{}, nil
	case "fenced":
		e, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			return Reply{}, fmt.Errorf("malformed answer %q", line)
		}
		return Reply{Fenced: true, Current: e}, nil
	case "error":
		return Reply{Err: errors.New(rest)}, nil
	}
	return Reply{}, fmt.Errorf("malformed answer %q", line)
}

// Checkpoint sends one request to the socket at path and returns the answer
// (Reply.Err set by the server), or an error if it could not be had.
func Checkpoint(ctx context.Context, path, partition string, epoch uint64, value []byte) (Reply, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Reply{}, fmt.Errorf("checkpoint: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write([]byte(FormatRequest(partition, epoch, value))); err != nil {
		return Reply{}, fmt.Errorf("checkpoint: %w", err)
	}
	line, err := readLine(bufio.NewReader(c))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return Reply{}, fmt.Errorf("checkpoint: no answer: %w", err)
	}
	rep, err := ParseReply(line)
	if err != nil {
		return Reply{}, fmt.Errorf("checkpoint: %w", err)
	}
	return rep, nil
}
