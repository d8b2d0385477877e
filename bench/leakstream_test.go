package bench

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"rtrace/internal/trace"
	"rtrace/internal/wire"
)

// leakStream is a raw memory trace of any size, as `rtrace sp-rtrace -e memory
// -b 10` writes it, built to be replayed: a head, a body repeated as often
// as the size asks, a fixed number of leaks spread among the repetitions,
// and a tail.
//
// The traced process keeps a window of live blocks, one per slot, each
// slot's block at the same address whenever it is live (malloc hands a
// freed block back). The head allocates every slot; each body step frees a
// random slot and allocates it again, so the live set is the same at every
// body boundary and the body can be repeated with each free matching the
// allocation before it. The tail frees every slot. What -l keeps is the
// window and, at the end, exactly the leaks: allocations in another region,
// never freed, from 10 stacks (so -c groups them). Mallocs have
// backtraces of 10 frames drawn from a few hundred distinct stacks; frees
// none (rtrace's default, no
// --backtrace-all). Call indexes are not in the stream (the reader counts
// calls), so the repetition leaves them consistent; times repeat with the
// body, which postproc -l -c does not look at.
type leakStream struct {
	head, body, tail []byte
	leaks            [][]byte // one allocation each
	leakCalls        []trace.Call
	bodyCalls        int
	headCalls        int // the head's calls, and the tail's
}

// leakStreamParams size the generated process.
type leakStreamParams struct {
	window    int // live blocks at any time
	stacks    int // distinct backtraces
	depth     int // frames per backtrace
	leaks     int // blocks never freed
	bodyPairs int // free/malloc pairs in the body
}

var defaultLeakStream = leakStreamParams{window: 1000, stacks: 200, depth: 10, leaks: 50, bodyPairs: 16384}

// Addresses of the made-up process.
const (
	heapBase = 0x55555575a000 // the window's blocks
	leakBase = 0x7fffe0000000 // the leaks, mmap'ed arenas
	slotSize = 0x100
	libcBase = 0x7ffff7c00000
)

// newLeakStream builds the stream's parts over the executable mappings of
// mods (the first is the program).
func newLeakStream(p leakStreamParams, mods []*module) (*leakStream, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pool []uint64
	for _, m := range mods {
		pool = append(pool, m.returnAddrs(rng, 2*p.stacks*p.depth/len(mods))...)
	}
	stacks := make([][]trace.Frame, p.stacks)
	for i := range stacks {
		for range p.depth {
			stacks[i] = append(stacks[i], trace.Frame{Addr: pool[rng.IntN(len(pool))]})
		}
	}
	hdr := &trace.Header{Version: "3.0", Arch: "x86_64", Time: time.Date(2025, 1, 2, 10, 0, 0, 0, time.Local),
		Process: mods[0].Path, Pid: 4242, Depth: p.depth}
	clock := 10 * time.Hour
	call := func(alloc bool, slot int, size uint64, frames []trace.Frame) *trace.Call {
		clock += 150 * time.Nanosecond
		c := &trace.Call{Time: clock, Tid: hdr.Pid, Res: 1, Alloc: alloc, Name: "free", ID: heapBase + uint64(slot)*slotSize}
		if alloc {
			c.Name, c.Size, c.Frames = "malloc", size, frames
		}
		return c
	}
	s := &leakStream{bodyCalls: 2 * p.bodyPairs, headCalls: p.window}
	var err error
	s.head, err = packets(hdr, func(w *wire.Writer) error {
		if err := writeMemoryPreamble(w, mods); err != nil {
			return err
		}
		for slot := range p.window {
			if err := w.Write(call(true, slot, 16+rng.Uint64N(1000), stacks[rng.IntN(len(stacks))])); err != nil {
				return err
			}
		}
		return nil
	}, true)
	if err != nil {
		return nil, err
	}
	s.body, err = packets(hdr, func(w *wire.Writer) error {
		for range p.bodyPairs {
			slot := rng.IntN(p.window)
			if err := w.Write(call(false, slot, 0, nil)); err != nil {
				return err
			}
			if err := w.Write(call(true, slot, 16+rng.Uint64N(1000), stacks[rng.IntN(len(stacks))])); err != nil {
				return err
			}
		}
		return nil
	}, false)
	if err != nil {
		return nil, err
	}
	for k := range p.leaks {
		c := trace.Call{Time: clock, Tid: hdr.Pid, Res: 1, Alloc: true, Name: "malloc",
			Size: 4000 + uint64(k)*8, ID: leakBase + uint64(k)*0x10000, Frames: stacks[(k%10*7)%len(stacks)]}
		b, err := packets(hdr, func(w *wire.Writer) error { return w.Write(&c) }, false)
		if err != nil {
			return nil, err
		}
		s.leaks = append(s.leaks, b)
		s.leakCalls = append(s.leakCalls, c)
	}
	s.tail, err = packets(hdr, func(w *wire.Writer) error {
		for slot := range p.window {
			if err := w.Write(call(false, slot, 0, nil)); err != nil {
				return err
			}
		}
		return nil
	}, false)
	return s, err
}

// packets returns what fn writes with a wire.Writer, after the header's
// packets when withHeader is set (without them otherwise: a part to append
// to a stream that has them).
func packets(hdr *trace.Header, fn func(w *wire.Writer) error, withHeader bool) ([]byte, error) {
	var buf bytes.Buffer
	w := wire.NewWriter(&buf)
	if err := w.Write(hdr); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	skip := buf.Len()
	if withHeader {
		skip = 0
	}
	if err := fn(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes()[skip:], nil
}

// leakStreamRun is what one write of the stream held.
type leakStreamRun struct {
	bytes int64
	calls int
}

// reps is how many bodies make a stream of about size bytes (at least one).
func (s *leakStream) reps(size int64) int64 {
	fixed := int64(len(s.head) + len(s.tail))
	for _, l := range s.leaks {
		fixed += int64(len(l))
	}
	return max(1, (size-fixed+int64(len(s.body))/2)/int64(len(s.body)))
}

// write writes a stream of about size bytes to w: the head, the bodies
// with leak k before body k*reps/leaks (the first leak right after the
// head, the last most of the way through), the tail.
func (s *leakStream) write(w io.Writer, size int64) (leakStreamRun, error) {
	var run leakStreamRun
	put := func(b []byte, calls int) error {
		n, err := w.Write(b)
		run.bytes += int64(n)
		run.calls += calls
		if err != nil {
			return fmt.Errorf("writing the stream at byte %d: %w", run.bytes, err)
		}
		return nil
	}
	if err := put(s.head, s.headCalls); err != nil {
		return run, err
	}
	reps, k := s.reps(size), 0
	for r := range reps {
		for ; k < len(s.leaks) && int64(k)*reps/int64(len(s.leaks)) <= r; k++ {
			if err := put(s.leaks[k], 1); err != nil {
				return run, err
			}
		}
		if err := put(s.body, s.bodyCalls); err != nil {
			return run, err
		}
	}
	for ; k < len(s.leaks); k++ { // more leaks than bodies
		if err := put(s.leaks[k], 1); err != nil {
			return run, err
		}
	}
	return run, put(s.tail, s.headCalls)
}
