package sqlitestore

import (
	"encoding/binary"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// fileWatch is an inotify watch on a file: events gets a value
// (coalesced) whenever the file is written.
type fileWatch struct {
	path   string
	f      *os.File
	fd     int
	events chan struct{}

	mu   sync.Mutex
	wd   int // -1 when the watch is lost (the file was deleted)
	done chan struct{}
}

// watchFile starts watching path; nil if inotify is not available.
func watchFile(path string) *fileWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil // e.g. fs.inotify.max_user_instances reached: poll
	}
	w := &fileWatch{path: path, fd: fd, f: os.NewFile(uintptr(fd), "inotify"), events: make(chan struct{}, 1), wd: -1, done: make(chan struct{})}
	w.rearm()
	go w.read()
	return w
}

// ok reports whether the watch is in place.
func (w *fileWatch) ok() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wd >= 0
}

// rearm (re)adds the watch, reporting whether it is in place.
func (w *fileWatch) rearm() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wd >= 0 {
		return true
	}
	wd, err := unix.InotifyAddWatch(w.fd, w.path, unix.IN_MODIFY|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF)
	if err != nil {
		return false
	}
	w.wd = wd
	return true
}

func (w *fileWatch) read() {
	defer close(w.done)
	buf := make([]byte, 4096)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return // closed
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := binary.NativeEndian.Uint32(buf[off+12:])
			if mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0 {
				w.mu.Lock()
				if int32(w.wd) == wd {
					if mask&unix.IN_IGNORED == 0 {
						_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
					}
					w.wd = -1
				}
				w.mu.Unlock()
			}
			off += unix.SizeofInotifyEvent + int(size)
		}
		select {
		case w.events <- struct{}{}:
		default:
		}
	}
}

func (w *fileWatch) close() {
	if w == nil {
		return
	}
	w.f.Close()
	<-w.done
}
