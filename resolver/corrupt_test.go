package resolver

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCorruptFiles feeds the resolver damaged copies of the fixture: each
// gives one warning and the forms without source lines, never a panic.
func TestCorruptFiles(t *testing.T) {
	run := runFixture(t, fixtureBuilds[0])
	orig, err := os.ReadFile(run.exe)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(run.exe)
	if err != nil {
		t.Fatal(err)
	}
	sec := func(name string) *elf.Section {
		s := ef.Section(name)
		if s == nil {
			t.Fatalf("fixture has no %s", name)
		}
		return s
	}
	fill := func(b []byte, off, n uint64, v byte) []byte {
		b = append([]byte(nil), b...)
		for i := off; i < off+n && i < uint64(len(b)); i++ {
			b[i] = v
		}
		return b
	}
	// e_shoff, the section header table's offset (ELF64 header, gABI).
	shdrs := binary.LittleEndian.Uint64(orig[0x28:])
	info, line, abbrev := sec(".debug_info"), sec(".debug_line"), sec(".debug_abbrev")
	kids := childrenOf(t, ef, "mid")
	ef.Close()
	for _, c := range []struct {
		name string
		data []byte
		want string // for the "mid" frame; %s is the file
	}{
		{"truncated header", orig[:40], "from %s"},
		{"truncated", orig[:len(orig)/3], "from %s"},
		{"garbled section headers", fill(orig, shdrs, uint64(len(orig))-shdrs, 0xa5), "from %s"},
		{"garbled .debug_info", fill(orig, info.Offset, info.Size, 0xff), "mid() from %s"},
		{"garbled .debug_line", fill(orig, line.Offset, line.Size, 0xff), "mid() from %s"},
		{"garbled .debug_abbrev", fill(orig, abbrev.Offset, abbrev.Size, 0x7f), "mid() from %s"},
		// The entries inside one function are garbage, those the unit's
		// walk reads (skipping by DW_AT_sibling) are not: lines stay, the
		// inline index of the unit goes, with a warning when first read.
		{"garbled DIEs", fill(orig, info.Offset+uint64(kids.lo), uint64(kids.hi-kids.lo), 0xff), "mid() at resolve.c:" + strconv.Itoa(markerLine(t, "resolve.c", "mid-call"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "exe")
			if err := os.WriteFile(path, c.data, 0o755); err != nil {
				t.Fatal(err)
			}
			var warn strings.Builder
			r := run.resolver(Options{Warn: &warn}, map[string]string{run.exe: path})
			want := strings.ReplaceAll(c.want, "%s", path)
			if got := r.Frame(run.rets["mid"]); got != want {
				t.Errorf("Frame = %q, want %q", got, want)
			}
			for _, tag := range []string{"inlined", "top", "main"} {
				r.Frame(run.rets[tag])
			}
			if n := strings.Count(warn.String(), "\n"); n != 1 || !strings.Contains(warn.String(), path) {
				t.Errorf("want one warning naming %s, got:\n%s", path, warn.String())
			}
			t.Log(strings.TrimSpace(warn.String()))
		})
	}
}

// childrenOf returns the .debug_info offsets of the children of the
// subprogram name, which must have a DW_AT_sibling.
func childrenOf(t *testing.T, ef *elf.File, name string) span {
	d, err := ef.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			t.Fatalf("no subprogram %s with children and a sibling: %v", name, err)
		}
		sib, ok := e.Val(dwarf.AttrSibling).(dwarf.Offset)
		if e.Tag == dwarf.TagSubprogram && e.Val(dwarf.AttrName) == name && e.Children && ok {
			c, err := r.Next()
			if err != nil || c == nil {
				t.Fatal(err)
			}
			return span{uint64(c.Offset), uint64(sib)}
		}
	}
}
