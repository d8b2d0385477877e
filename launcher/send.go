package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rtrace/internal/uftrace"
)

// sender sends the trace to `uftrace recv` (--host, --port), as uftrace
// record --host does: connected before the program starts (a receiver that
// is not there fails the command at once), the trace recorded into a
// temporary directory, sent once it is complete, then removed.
type sender struct {
	addr string // host:port
	name string // the directory's name at the receiver (-d)
	conn net.Conn
	tmp  string // the temporary directory the trace is written in
	once sync.Once
	err  error // close's
	// cut: a write failed, perhaps in the middle of a message, after
	// which an end message would be read as part of it; sent: every
	// directory went.
	cut, sent atomic.Bool
}

// Write writes to the connection, noting a failed write (cut).
func (s *sender) Write(b []byte) (int, error) {
	n, err := s.conn.Write(b)
	if err != nil {
		s.cut.Store(true)
	}
	return n, err
}

// newSender connects to uftrace recv at host:port and makes the temporary
// directory; dir is -d (the name the receiver is given). Cancelling ctx
// (a signal to rtrace) stops the connecting.
func newSender(ctx context.Context, host string, port int, dir string) (*sender, error) {
	name := dir
	if name == "" {
		name = "uftrace.data"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	d := net.Dialer{Timeout: dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if ctx.Err() != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, interrupted(ctx)
	}
	if err != nil {
		return nil, &ExitError{1, fmt.Errorf("--host %s: %w (is 'uftrace recv --port %d' running there?)", addr, err, port)}
	}
	tmp, err := os.MkdirTemp("", "rtrace-send-")
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &sender{addr: addr, name: name, conn: conn, tmp: tmp}, nil
}

// dir is where the trace is recorded.
func (s *sender) dir() string { return filepath.Join(s.tmp, "uftrace.data") }

// send sends each directory of dirs (the trace, and its later windows:
// uftrace.data.1 is sent as NAME.1) and says where they went.
func (s *sender) send(dirs []string) ([]string, error) {
	var outs []string
	for _, d := range dirs {
		name := s.name + strings.TrimPrefix(filepath.Base(d), "uftrace.data")
		if err := uftrace.Send(s, name, d); err != nil {
			return outs, fmt.Errorf("sending the trace to %s: %w", s.addr, err)
		}
		outs = append(outs, fmt.Sprintf("%s at %s (uftrace recv)", name, s.addr))
	}
	s.sent.Store(true)
	return outs, nil
}

// close ends the connection (uftrace recv expects the end message even
// when nothing was sent), closes it and removes the temporary directory.
// It may run twice (a signal, then the deferred call).
func (s *sender) close() error {
	s.once.Do(func() {
		var err error
		if !s.cut.Load() {
			s.conn.SetWriteDeadline(time.Now().Add(endTimeout))
			err = uftrace.SendEnd(s.conn)
		}
		s.err = errors.Join(err, s.conn.Close(), os.RemoveAll(s.tmp))
	})
	return s.err
}

// abort makes the writes of a send in progress fail at once (a signal).
func (s *sender) abort() { s.conn.SetDeadline(time.Now()) }

// endTimeout bounds the wait for a receiver that stopped reading, at
// the end.
const endTimeout = 5 * time.Second

// dialTimeout bounds the wait for a host that does not answer.
const dialTimeout = 30 * time.Second
