package uftrace

import (
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// recv reads what Send wrote as uftrace recv does (cmds/recv.c): a
// directory's name, then its files: data appended to <tid>.dat, metadata
// files appended by name, the info header's fields turned back to host
// order; another directory's name switches to it. Files are keyed DIR/NAME.
func recv(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	name := ""
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			t.Fatalf("no end message: %v", err)
		}
		be := binary.BigEndian
		if be.Uint16(hdr[:]) != msgMagic {
			t.Fatalf("bad magic %x", hdr[:2])
		}
		body := make([]byte, be.Uint32(hdr[4:]))
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		switch be.Uint16(hdr[2:]) {
		case msgDirName:
			name = string(body)
		case msgData:
			f := name + "/" + strconv.Itoa(int(int32(be.Uint32(body)))) + ".dat"
			files[f] = append(files[f], body[4:]...)
		case msgMetaData:
			n := be.Uint32(body)
			f := name + "/" + string(body[4:4+n])
			files[f] = append(files[f], body[4+n:]...)
		case msgInfo:
			h := bytes.Clone(body[:40])
			le := binary.LittleEndian
			le.PutUint32(h[8:], be.Uint32(body[8:]))
			le.PutUint16(h[12:], be.Uint16(body[12:]))
			le.PutUint64(h[16:], be.Uint64(body[16:]))
			le.PutUint64(h[24:], be.Uint64(body[24:]))
			le.PutUint16(h[32:], be.Uint16(body[32:]))
			files[name+"/info"] = append(h, body[40:]...)
		case msgEnd:
			return files
		default:
			t.Fatalf("message type %d", be.Uint16(hdr[2:]))
		}
	}
}

// Send sends every file of a trace directory, as uftrace recv rebuilds it:
// records in chunks, the info header in network byte order; a second
// directory on the same connection; then the end.
func TestSend(t *testing.T) {
	dir := t.TempDir()
	info := append([]byte("Ftrace!\x00\x04\x00\x00\x00\x28\x00\x01\x02"), make([]byte, 24)...)
	binary.LittleEndian.PutUint64(info[16:], 0x62)
	binary.LittleEndian.PutUint64(info[24:], 0x3bff)
	binary.LittleEndian.PutUint16(info[32:], 1024)
	info = append(info, "exename:/bin/x\n"...)
	want := map[string][]byte{
		"info":                     info,
		"123.dat":                  bytes.Repeat([]byte("0123456789abcdef"), maxChunk/16*2+3), // three chunks
		"124.dat":                  []byte("fedcba9876543210"),
		"task.txt":                 []byte("TASK tid=123 pid=123\n"),
		"sid-0123456789abcdef.map": []byte("00400000-00401000 r-xp 00000000 08:01 1 /bin/x\n"),
		"x.sym":                    []byte("# symbols: 1\n"),
		"x.dbg":                    []byte("F: 1000 main\n"),
		"default.opts":             nil,
		"extern.dat":               []byte("not a task's records\n"),
	}
	for n, b := range want {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir1 := t.TempDir()
	for _, n := range []string{"info", "task.txt"} {
		if err := os.WriteFile(filepath.Join(dir1, n), want[n], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := Send(&buf, "my.data", dir); err != nil {
		t.Fatal(err)
	}
	if err := Send(&buf, "my.data.1", dir1); err != nil {
		t.Fatal(err)
	}
	if err := SendEnd(&buf); err != nil {
		t.Fatal(err)
	}
	got := recv(t, &buf)
	if buf.Len() != 0 {
		t.Errorf("%d bytes after the end", buf.Len())
	}
	for n, b := range maps.Clone(want) {
		delete(want, n)
		want["my.data/"+n] = b
	}
	want["my.data.1/info"] = info
	want["my.data.1/task.txt"] = want["my.data/task.txt"]
	for n := range want {
		if want[n] == nil {
			want[n] = []byte{}
		}
		if got[n] == nil {
			got[n] = []byte{}
		}
	}
	if !maps.EqualFunc(got, want, bytes.Equal) {
		for n := range want {
			if !bytes.Equal(got[n], want[n]) {
				t.Errorf("%s: %d bytes received, want %d", n, len(got[n]), len(want[n]))
			}
		}
		t.Errorf("received %d files, want %d", len(got), len(want))
	}
	if err := Send(io.Discard, "x", filepath.Join(dir, "sub")); err == nil {
		t.Error("a directory without info was sent")
	}
}
