package uftrace_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/uftrace"
)

// packDir and unpackDir turn a trace directory into one fuzz input and back:
// each file is its name, a NUL, its length (4 bytes, little endian) and its
// bytes. unpackDir keeps what parses and drops names that are not plain
// file names, so every input is some directory.
func packDir(t testing.TB, dir string) []byte {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(e.Name())
		b.WriteByte(0)
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(data))))
		b.Write(data)
	}
	return b.Bytes()
}

func unpackDir(t testing.TB, in []byte, dir string) {
	for len(in) > 0 {
		i := bytes.IndexByte(in, 0)
		if i < 0 || len(in) < i+5 {
			return
		}
		name := string(in[:i])
		n := int(binary.LittleEndian.Uint32(in[i+1:]))
		in = in[i+5:]
		if n > len(in) {
			n = len(in)
		}
		data := in[:n]
		in = in[n:]
		if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzOpen reads whole trace directories, the reader as uftrace's users and
// rtrace's later stages meet it: info with its argument specs (the spec
// loader), task.txt, the maps, the symbol and .dbg files, events.txt and the
// task data, merged in time order. Whatever the files hold, the reader
// returns records or an error, never panics, and ends.
func FuzzOpen(f *testing.F) {
	seed := f.TempDir()
	writeSyntheticSkip(f, seed, "rec")
	whole := packDir(f, seed)
	f.Add(whole)
	f.Add(whole[:len(whole)/2])
	// The same trace with auto-args and a regex pattern type in its info.
	auto := f.TempDir()
	unpackDir(f, whole, auto)
	info, err := os.ReadFile(filepath.Join(auto, "info"))
	if err != nil {
		f.Fatal(err)
	}
	in, err := uftrace.ParseInfo(info)
	if err != nil {
		f.Fatal(err)
	}
	in.PatternType = "glob"
	in.ArgSpecs = append(in.ArgSpecs, uftrace.ArgSpecLine{Key: "auto-args", Value: "1"},
		uftrace.ArgSpecLine{Key: "argauto", Value: "strlen@arg1/s;malloc@arg1"},
		uftrace.ArgSpecLine{Key: "argspec", Value: "le*;child@arg1/x32"})
	if info, err = in.MarshalBinary(); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(auto, "info"), info, 0o644); err != nil {
		f.Fatal(err)
	}
	f.Add(packDir(f, auto))

	// The seed reads whole: a reader that rejects it would make every
	// fuzzed input fail early and test nothing.
	if n := readCount(seed); n < 20 {
		f.Fatalf("the seed trace gave %d records", n)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dir := t.TempDir()
		unpackDir(t, in, dir)
		readCount(dir)
	})
}

// readCount reads every record of the trace in dir, resolving each one's
// address as replay does, and returns how many it read before the end or
// an error.
func readCount(dir string) int {
	r, err := uftrace.Open(dir)
	if err != nil {
		return 0
	}
	defer r.Close()
	n := 0
	for {
		it, err := r.Next()
		if err != nil {
			return n
		}
		n++
		if s := r.SessionAt(it.Tid, it.Time); s != nil {
			s.Resolve(it.Addr)
		}
		_ = slices.Clone(it.Args)
	}
}
