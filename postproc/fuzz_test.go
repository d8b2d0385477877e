package postproc

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rtrace/internal/rtext"
)

// FuzzRun: any text, under any mix of filters, goes through Run without a
// panic, and what Run writes reads back as a trace.
func FuzzRun(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(goldenDir, "sample.txt*"))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(i*37))
	}
	f.Add([]byte(leakTrace), uint16(0xffff))
	f.Add([]byte(leakTrace), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, bits uint16) {
		opts := fuzzOptions(bits)
		var out bytes.Buffer
		if err := Run(rtext.NewReader(bytes.NewReader(data)), rtext.NewWriter(&out), opts); err != nil {
			return
		}
		rd := rtext.NewReader(&out)
		for {
			if _, err := rd.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("output does not read back: %v\n%s", err, out.String())
			}
		}
	})
}

// fuzzOptions turns bits into options.
func fuzzOptions(bits uint16) Options {
	on := func(i int) bool { return bits&(1<<i) != 0 }
	o := Options{Leaks: on(0), Compress: on(1), RemoveArgs: on(2)}
	if o.Compress {
		o.Sort = []string{"", SortSize, SortSizeAsc, SortCount, SortCountAsc}[int(bits>>12)%5]
	}
	if on(3) {
		m := uint32(bits>>8) & 3
		o.Context = &m
	}
	if on(4) {
		o.Resource = uint32(bits>>10) & 3
	}
	if on(5) {
		d := int(bits>>6) & 3
		o.Depth = &d
	}
	if on(6) {
		o.Include = map[int]bool{1: true, 2: true}
	}
	if on(7) {
		o.Exclude = map[int]bool{3: true}
	}
	if on(8) {
		o.CallAddress = []AddrRange{{Start: 0x8048500, Size: 0x100}, {Lib: "libc-2.12.1.so", Start: 0x16000, Size: 0x1000}}
	}
	if on(9) {
		o.Resolve, o.Resolver = true, &fakeResolver{}
	}
	return o
}

// FuzzParseOptions: no option string makes the parser panic, and what it
// accepts it accepts again.
func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{"-l -c -r", "-lcr", "-c -s count", "-C0 -R 3 -b 5", "--include idx --exclude=idx",
		"--call-address /lib/libc.so.6:1a40+3c", "--sort=size -c", "-x", "-s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		o, err := parseOptions(args, inP, files)
		if err != nil {
			return
		}
		if _, err := parseOptions(args, inP, files); err != nil {
			t.Fatalf("%q parsed once (%+v), then not: %v", s, o, err)
		}
	})
}
