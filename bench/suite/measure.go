package suite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"rtrace/internal/procstatus"
)

// Sample is what one run of a command cost.
type Sample struct {
	Wall time.Duration
	CPU  time.Duration // user + system, of the command and what it waited for
	// RSS is the peak resident memory of the tool's own processes, in
	// bytes: the largest VmHWM (proc(5)) seen of each process of the
	// command's tree but the traced program's, summed. 0 when not sampled.
	RSS int64
}

// Cmd is one command to time.
type Cmd struct {
	Argv []string
	Dir  string
	Env  []string // added to rtrace's environment
	// Stdin, when not "", is a file the command reads.
	Stdin string
	// Prog is the traced program's path: its own memory is not the tool's,
	// nor that of Children (more of the program's executables).
	Prog     string
	Children []string
	// Stderr, when not nil, receives the command's error output too.
	Stderr io.Writer
	// Stdout, when not nil, receives the command's output.
	Stdout io.Writer
	// Timeout, when not 0, stops the command (its whole process group)
	// once it has run that long: the run fails with ErrTimeout.
	Timeout time.Duration
}

// ErrTimeout is the error of a run stopped at its Timeout.
var ErrTimeout = errors.New("stopped: over the time limit")

// rssPeriod is how often the tool's memory is sampled. VmHWM is a
// high-water mark, so a sample misses only what grew in the last period.
const rssPeriod = 20 * time.Millisecond

// Run runs c once and measures it.
func Run(c Cmd) (Sample, error) {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdout = c.Stdout // nil: /dev/null, no copying goroutine
	// A process that escaped the group kill and holds the pipe open does
	// not hold the run forever.
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, c.Stderr)
	}
	if c.Stdin != "" {
		f, err := os.Open(c.Stdin)
		if err != nil {
			return Sample{}, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Sample{}, fmt.Errorf("%s: %w", c.Argv[0], err)
	}
	running.add(cmd.Process.Pid)
	defer running.remove(cmd.Process.Pid)
	var timedOut atomic.Bool
	if c.Timeout > 0 {
		t := time.AfterFunc(c.Timeout, func() {
			timedOut.Store(true)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		})
		defer t.Stop()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rss int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		rss = sampleRSS(cmd.Process.Pid, append([]string{c.Prog}, c.Children...), stop)
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(stop)
	wg.Wait()
	if timedOut.Load() {
		return Sample{}, fmt.Errorf("%w (%s)", ErrTimeout, c.Timeout)
	}
	if err != nil {
		return Sample{}, fmt.Errorf("%s: %v\n%s", strings.Join(c.Argv, " "), err, tail(stderr.String(), 2000))
	}
	s := Sample{Wall: wall, RSS: rss}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// sampleRSS follows the process tree under root until stop, and returns
// the sum over its processes (the traced program's excepted: those
// running one of progs) of the largest VmHWM seen of each.
func sampleRSS(root int, progs []string, stop <-chan struct{}) int64 {
	peak := map[int]int64{}
	var progIDs []os.FileInfo
	for _, p := range progs {
		if p == "" {
			continue
		}
		if id, err := os.Stat(p); err == nil {
			progIDs = append(progIDs, id)
		}
	}
	isProg := func(exe os.FileInfo) bool {
		for _, id := range progIDs {
			if os.SameFile(exe, id) {
				return true
			}
		}
		return false
	}
	tick := time.NewTicker(rssPeriod)
	defer tick.Stop()
	for {
		for _, pid := range tree(root) {
			// The program, by file identity (a path may be a symlink);
			// what its process held before its exec (a fork of the tool)
			// is not the tool's either.
			if exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && isProg(exe) {
				delete(peak, pid)
				continue
			}
			if hwm, ok := vmHWM(pid); ok && hwm > peak[pid] {
				peak[pid] = hwm
			}
		}
		select {
		case <-stop:
			var sum int64
			for _, v := range peak {
				sum += v
			}
			return sum
		case <-tick.C:
		}
	}
}

// tree lists root and its descendants, from /proc/PID/task/TID/children.
func tree(root int) []int {
	list := []int{root}
	for i := 0; i < len(list); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", list[i]))
		for _, f := range tasks {
			b, _ := os.ReadFile(f)
			for _, w := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(w); err == nil {
					list = append(list, pid)
				}
			}
		}
	}
	return list
}

// vmHWM reads a process's peak resident set size from /proc/PID/status.
func vmHWM(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	return procstatus.HWM(b)
}

// running is the process groups of the commands being measured, so that
// an interrupted bench stops them too (each runs in its own group, out of
// the terminal's reach).
var running = &groups{pids: map[int]bool{}}

type groups struct {
	mu   sync.Mutex
	pids map[int]bool
}

func (g *groups) add(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pids[pid] = true
}

func (g *groups) remove(pid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.pids, pid)
}

// KillRunning kills the process groups of the commands being measured.
func KillRunning() {
	running.mu.Lock()
	defer running.mu.Unlock()
	for pid := range running.pids {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}
