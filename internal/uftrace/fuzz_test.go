package uftrace

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func FuzzParseInfo(f *testing.F) {
	st := 0
	in := Info{ExeName: "/bin/x", BuildID: "ab", ExitStatus: &st, Cmdline: "x -y", TaskIDs: []int{1, 2},
		ArgSpecs: []ArgSpecLine{{"argspec", "f@arg1"}, {"auto-args", "1"}}, Usage: &Usage{}, PatternType: "regex"}
	FillSystemInfo(&in)
	b, err := in.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:40])
	f.Add([]byte("Ftrace!\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := ParseInfo(data)
		if err != nil {
			return
		}
		// What parses must re-encode (unless a value cannot be written back).
		if _, err := info.MarshalBinary(); err != nil && !bytes.Contains(data, []byte("\n")) {
			t.Fatalf("re-encoding parsed info: %v", err)
		}
	})
}

func FuzzParseTaskFile(f *testing.F) {
	f.Add([]byte("SESS timestamp=64.610317652 pid=2625 sid=3994bc27016fbea0 exename=\"/tmp/ex/a\"\n" +
		"TASK timestamp=64.610398251 tid=2625 pid=2625\nFORK timestamp=1.5 pid=3 ppid=2\n" +
		"DLOP timestamp=1.000000002 tid=3 sid=3994bc27016fbea0 base=7f0000 libname=\"/lib/x y.so\"\n"))
	f.Add([]byte("TASK timestamp=1. tid=x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ParseTaskFile(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, e := range evs {
			// A parsed line prints back to a line that parses to the same event.
			if e.Kind == KindSess || e.Kind == KindDlop {
				if bytes.ContainsAny([]byte(e.Exename), "\"\n") {
					continue
				}
			}
			e2, err := ParseTaskLine(e.String())
			if err != nil {
				t.Fatalf("re-parsing %q: %v", e.String(), err)
			}
			if e2 != e {
				t.Fatalf("round trip changed %+v into %+v", e, e2)
			}
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, Record{Time: 1, Type: Exit, More: true, Depth: 3, Addr: 0x55c90c4d01d7}))
	f.Add(make([]byte, 15))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord(data)
		if err != nil {
			return
		}
		if got := AppendRecord(nil, r); !bytes.Equal(got, data[:RecordSize]) {
			t.Fatalf("re-encoding %x gave %x", data[:RecordSize], got)
		}
	})
}

func FuzzDecodePayload(f *testing.F) {
	f.Add("arg1/i8,arg2/s,fparg1/32,arg3/c", []byte{1, 0, 0, 0, 2, 0, 'h', 'i', 0, 0, 0xc0, 0x3f, 'z', 0, 0, 0})
	f.Add("retval/s", []byte{0xff, 0xff})
	f.Add("arg1/t16:S,fparg1/80", make([]byte, 32))
	f.Fuzz(func(t *testing.T, spec string, data []byte) {
		fs, err := ParseFuncSpec("f@" + spec)
		if err != nil {
			return
		}
		vals, n, err := DecodePayload(data, fs.Args)
		if err != nil {
			return
		}
		if n > len(data) || n%8 != 0 {
			t.Fatalf("payload length %d of %d bytes", n, len(data))
		}
		if _, err := AppendPayload(nil, fs.Args, vals); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseArgSpec(f *testing.F) {
	for _, s := range []string{"arg1/i32", "fparg2/64", "retval/s", "arg3/e:color", "arg1%stack+2", "arg2/t16:S%RDI+RSI", "arg1/x8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArgSpec(s)
		if err != nil {
			return
		}
		b, err := ParseArgSpec(a.String())
		if err != nil || b != a {
			t.Fatalf("%q -> %q -> %+v, %v", s, a.String(), b, err)
		}
	})
}

func FuzzParseMaps(f *testing.F) {
	f.Add([]byte("55c90c4cf000-55c90c4d4000 r-xp 00000000 00:00 0      /tmp/ex/a build-id:d5eb\n7ffe55204000-7ffe55225000 rw-p 00000000 00:00 0  [stack]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseMaps(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, m := range Modules(ms) {
			if m.End < m.Base {
				t.Fatalf("module %s ends before it starts", m.Path)
			}
		}
	})
}

func FuzzParseSymsAndDebug(f *testing.F) {
	f.Add([]byte("# path name: /a\n0000000000001139 T main\n00000000000011c0 ? __sym_end\n"))
	f.Add([]byte("F: 11c9 add\nL: 3 a.c\nA: @arg1,arg2\nR: @retval\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := ParseSyms(bytes.NewReader(data)); err == nil {
			for i := 0; i < 4; i++ {
				st.Lookup(binary.LittleEndian.Uint64(append(data, make([]byte, 8)...)) >> i)
			}
		}
		ParseDebug(bytes.NewReader(data))
	})
}

func FuzzSystemInfoParsers(f *testing.F) {
	f.Add([]byte("model name\t: AMD EPYC\nMemTotal: 24000000 kB\nMemAvailable: 1000 kB\nPRETTY_NAME=\"Debian\"\n"), "0-3,5")
	f.Fuzz(func(t *testing.T, data []byte, cpus string) {
		parseCPUDesc(data)
		parseMemInfo(data)
		parseDistro(data)
		if n := parseCPURange(cpus); n < 0 {
			t.Fatalf("negative CPU count %d", n)
		}
	})
}
