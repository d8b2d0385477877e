package tracer

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

// shmTrack follows the System V shared memory attachments the traced
// calls make, for sp-rtrace's account of a segment's end
// (src/modules/sp_rtrace_shmsysv.c): shmctl(IPC_RMID) ends a segment
// nothing is attached to; one still attached ends at its last shmdt, a
// release of the segment reported as that shmdt's. The kernel destroys a
// segment marked for removal when its last attachment goes (shmctl(2)).
//
// Attachments are counted from the calls traced, across the traced
// processes: one a forked child inherits is not counted (its shmdt then
// releases its address alone), nor one of an untraced process. Both
// engines use it: the int3 engine from its loop, the fast one from the
// drain's goroutine, so it locks.
type shmTrack struct {
	mu     sync.Mutex
	att    map[shmAddr]uint64 // a process's attachment -> its segment
	count  map[uint64]int     // a segment's attachments
	marked map[uint64]bool    // segments IPC_RMID left to their last shmdt
}

type shmAddr struct {
	pid  int
	addr uint64
}

func newShmTrack() *shmTrack {
	return &shmTrack{att: map[shmAddr]uint64{}, count: map[uint64]int{}, marked: map[uint64]bool{}}
}

// effects adjusts evs, what a call of f by thread tid did (resEffects), to
// the attachments: shmat counts one, shmctl(IPC_RMID) of a segment still
// attached leaves its release to the last shmdt, which adds it (of
// resource type segRes).
func (s *shmTrack) effects(evs []resEvent, f *resFn, tid int, args *[6]uint64) []resEvent {
	if len(evs) == 0 {
		return evs // the call failed: nothing changed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch f.rf.Sym {
	case "shmat":
		id := uint64(uint32(args[0]))
		s.att[shmAddr{tgid(tid), evs[0].ID}] = id
		s.count[id]++
	case "shmdt":
		k := shmAddr{tgid(tid), evs[0].ID}
		id, ok := s.att[k]
		if !ok {
			break
		}
		delete(s.att, k)
		if s.count[id]--; s.count[id] > 0 {
			break
		}
		delete(s.count, id)
		if s.marked[id] {
			delete(s.marked, id)
			evs = append(evs, resEvent{ID: id, Res: f.segRes})
		}
	case "shmctl":
		if id := evs[0].ID; s.count[id] > 0 {
			s.marked[id] = true
			evs = evs[:0]
		}
	}
	return evs
}

// tgid is the process of thread tid, tid itself when it is gone.
func tgid(tid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return tid
	}
	v, ok := statusValue(status, "Tgid:")
	if !ok {
		return tid
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return n
	}
	return tid
}

// shmFuncs are the shm module's functions shmTrack follows.
var shmFuncs = map[string]bool{"shmat": true, "shmdt": true, "shmctl": true}
