package tracer

import "testing"

const sysvipcShm = `       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
         0         11  1600                  1024  4242  4242      2     0     0     0     0 1764345000 1764345000 1764345000                  4096                     0
         0         12   600                  2048  4242     0      0     0     0     0     0          0          0 1764345001                     0                     0
`

const shmMaps = `55d0a0000000-55d0a0001000 r-xp 00000000 08:01 1234 /bin/prog
7f96fda4c000-7f96fda4d000 rw-s 00000000 00:01 11 /SYSV00000000 (deleted)
7f96fda4d000-7f96fda4e000 rw-s 00000000 00:01 12 /SYSV0000abcd (deleted)
7ffc0000000-7ffc0021000 rw-p 00000000 00:00 0 [stack]
`

// The kernel's view of System V segments, as /proc shows it: a segment
// marked for removal (perms with SHM_DEST) and its attachments; the
// segment attached at an address (the maps line's inode).
func TestShmProc(t *testing.T) {
	for _, c := range []struct {
		id           uint64
		nattch       int
		dest, exists bool
	}{{11, 2, true, true}, {12, 0, false, true}, {13, 0, false, false}} {
		n, dest, ok := shmStateIn([]byte(sysvipcShm), c.id)
		if n != c.nattch || dest != c.dest || ok != c.exists {
			t.Errorf("segment %d: nattch %d, dest %v, found %v; want %d, %v, %v", c.id, n, dest, ok, c.nattch, c.dest, c.exists)
		}
	}
	for _, c := range []struct {
		addr uint64
		id   uint64
		ok   bool
	}{{0x7f96fda4c000, 11, true}, {0x7f96fda4d000, 12, true}, {0x7f96fda4c800, 0, false}, {0x55d0a0000000, 0, false}} {
		if id, ok := shmSegmentIn([]byte(shmMaps), c.addr); id != c.id || ok != c.ok {
			t.Errorf("segment at %#x: %d, %v; want %d, %v", c.addr, id, ok, c.id, c.ok)
		}
	}
	// What a call does, given what its entry read.
	f := &resFn{rf: &ResFunc{Sym: "shmdt"}, res: 2, shmRole: 2, segRes: 1}
	evs := []resEvent{{ID: 0x7f96fda4c000}}
	if got := shmEffects(evs, &resCall{f: f, shmEnds: true, shmSeg: 11}); len(got) != 2 || got[1] != (resEvent{ID: 11, Res: 1}) {
		t.Errorf("the last shmdt of a removed segment: %+v, want the address and segment 11 released", got)
	}
	if got := shmEffects(nil, &resCall{f: f, shmEnds: true, shmSeg: 11}); len(got) != 0 {
		t.Errorf("a failed shmdt: %+v, want nothing", got)
	}
	ctl := &resFn{rf: &ResFunc{Sym: "shmctl"}, res: 1, shmRole: 1, segRes: 1}
	if got := shmEffects([]resEvent{{ID: 11}}, &resCall{f: ctl, shmKeep: true}); len(got) != 0 {
		t.Errorf("IPC_RMID while attached: %+v, want nothing yet", got)
	}
	if got := shmEffects([]resEvent{{ID: 12}}, &resCall{f: ctl}); len(got) != 1 {
		t.Errorf("IPC_RMID with nothing attached: %+v, want the segment released", got)
	}
}

func FuzzShmProc(f *testing.F) {
	f.Add([]byte(sysvipcShm), uint64(11))
	f.Add([]byte(shmMaps), uint64(0x7f96fda4c000))
	f.Add([]byte("0 11 9999999999999 1 1 1 -1\n"), uint64(11))
	f.Fuzz(func(t *testing.T, text []byte, v uint64) {
		shmStateIn(text, v)
		shmSegmentIn(text, v)
	})
}
