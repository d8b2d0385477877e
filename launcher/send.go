package launcher

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
}

// newSender connects to uftrace recv at host:port and makes the temporary
// directory; dir is -d (the name the receiver is given).
func newSender(host string, port int, dir string) (*sender, error) {
	if port <= 0 || port > 65535 {
		return nil, &UsageError{fmt.Sprintf("--port %d: want a TCP port, 1 to 65535", port)}
	}
	name := dir
	if name == "" {
		name = "uftrace.data"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := net.Dial("tcp", addr)
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
		if err := uftrace.Send(s.conn, name, d); err != nil {
			return outs, fmt.Errorf("sending the trace to %s: %w", s.addr, err)
		}
		outs = append(outs, fmt.Sprintf("%s at %s (uftrace recv)", name, s.addr))
	}
	return outs, nil
}

// close closes the connection and removes the temporary directory.
func (s *sender) close() error {
	err := s.conn.Close()
	os.RemoveAll(s.tmp)
	return err
}
