package tracer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A System V segment's end, as sp-rtrace's shmsysv module reports it
// (src/modules/sp_rtrace_shmsysv.c): shmctl(IPC_RMID) ends a segment
// nothing is attached to; one still attached ends at its last shmdt,
// reported as a release of the segment by that shmdt. The kernel destroys
// a segment marked for removal when its last attachment goes (shmctl(2)).
// Both are read from the kernel at the call's entry, as sp-rtrace reads
// them (IPC_STAT there, /proc here): the shm module's shmctl and shmdt stop
// at their entry and return in both engines (resDesc), rare calls.

// shmEndRole says what the call of rf does to a segment's end: 1 shmctl,
// 2 shmdt, 0 neither (another module's, the audit module's own entries).
func shmEndRole(m *ResModule, rf *ResFunc) int {
	if m.Name != "shm" {
		return 0
	}
	switch rf.Sym {
	case "shmctl":
		return 1
	case "shmdt":
		return 2
	}
	return 0
}

// shmEntry reads, at the entry of c (args read) in process pid, what its
// return will need: for shmctl(IPC_RMID), whether the segment is still
// attached (its release then waits for the last shmdt); for shmdt, the
// segment it detaches when this is the last attachment of one marked for
// removal.
func shmEntry(c *resCall, pid int) {
	switch c.f.shmRole {
	case 1:
		if uint32(c.args[1]) != unix.IPC_RMID {
			return
		}
		if nattch, _, ok := shmState(uint64(uint32(c.args[0]))); ok && nattch > 0 {
			c.shmKeep = true
		}
	case 2:
		id, ok := shmSegmentAt(pid, c.args[0])
		if !ok {
			return
		}
		if nattch, dest, ok := shmState(id); ok && dest && nattch == 1 {
			c.shmEnds, c.shmSeg = true, id
		}
	}
}

// shmEffects adjusts evs, what c did (resEffects), by what its entry read.
func shmEffects(evs []resEvent, c *resCall) []resEvent {
	switch {
	case len(evs) == 0: // the call failed: nothing changed
	case c.shmKeep:
		evs = evs[:0] // attached still: the last shmdt ends it
	case c.shmEnds:
		evs = append(evs, resEvent{ID: c.shmSeg, Res: c.f.segRes})
	}
	return evs
}

// shmSegmentAt is the id of the System V segment attached at addr in
// process pid: /proc/<pid>/maps shows the attachment as the file
// /SYSV<key> whose inode number is the segment's id (ipc/shm.c, newseg).
func shmSegmentAt(pid int, addr uint64) (uint64, bool) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, false
	}
	return shmSegmentIn(maps, addr)
}

// shmSegmentIn is shmSegmentAt of the maps text.
func shmSegmentIn(maps []byte, addr uint64) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/SYSV") {
			continue
		}
		lo, _, ok := strings.Cut(f[0], "-")
		if start, err := strconv.ParseUint(lo, 16, 64); !ok || err != nil || start != addr {
			continue
		}
		if id, err := strconv.ParseUint(f[4], 10, 64); err == nil {
			return id, true
		}
	}
	return 0, false
}

// shmState reads the segment id's attachment count and whether it is
// marked for removal (SHM_DEST, 01000, in its mode: include/uapi/linux/shm.h)
// from /proc/sysvipc/shm (ipc/shm.c, sysvipc_shm_proc_show).
func shmState(id uint64) (nattch int, dest, ok bool) {
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		return 0, false, false
	}
	return shmStateIn(b, id)
}

// shmStateIn is shmState of the file's text.
func shmStateIn(text []byte, id uint64) (nattch int, dest, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // key shmid perms size cpid lpid nattch ...
		if len(f) < 7 {
			continue
		}
		if n, err := strconv.ParseUint(f[1], 10, 64); err != nil || n != id {
			continue
		}
		perms, err1 := strconv.ParseUint(f[2], 8, 32)
		n, err2 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil {
			return 0, false, false
		}
		return n, perms&0o1000 != 0, true
	}
	return 0, false, false
}
