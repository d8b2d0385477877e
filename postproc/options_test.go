package postproc

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// files is a fake file system for --include and --exclude.
func files(name string) ([]byte, error) {
	switch name {
	case "idx":
		return []byte("1\n 3 \n\n# comment\n12\n"), nil
	case "bad":
		return []byte("1\nx2\n"), nil
	}
	return nil, os.ErrNotExist
}

func TestParseOptions(t *testing.T) {
	zero, three, five := uint32(0), uint32(3), 5
	for _, tc := range []struct {
		args string
		want Options
	}{
		{"", Options{}},
		{"-l -c -r", Options{Leaks: true, Compress: true, Resolve: true}},
		{"-lcr", Options{Leaks: true, Compress: true, Resolve: true}},
		{"--filter-leaks --compress --resolve --remove-args -t -q", Options{Leaks: true, Compress: true, Resolve: true, RemoveArgs: true}},
		{"-c -s count", Options{Compress: true, Sort: SortCount}},
		{"-cs size", Options{Compress: true, Sort: SortSize}},
		{"-c --sort=count-asc", Options{Compress: true, Sort: SortCountAsc}},
		{"-c --sort size-asc", Options{Compress: true, Sort: SortSizeAsc}},
		{"-C0", Options{Context: &zero}},
		{"-C 0x3", Options{Context: &three}},
		{"--context=3 -R 3", Options{Context: &three, Resource: 3}},
		{"-b 5", Options{Depth: &five}},
		{"-lb5", Options{Leaks: true, Depth: &five}},
		{"--backtrace-depth=5", Options{Depth: &five}},
		{"--include idx", Options{Include: map[int]bool{1: true, 3: true, 12: true}}},
		{"--exclude=idx", Options{Exclude: map[int]bool{1: true, 3: true, 12: true}}},
		{"--call-address /lib/libc.so.6:1a40+3c --call-address 0x400000+0x10", Options{CallAddress: []AddrRange{
			{Lib: "/lib/libc.so.6", Start: 0x1a40, Size: 0x3c}, {Start: 0x400000, Size: 0x10}}}},
	} {
		got, err := parseOptions(strings.Fields(tc.args), inP, files)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

func TestParseOptionsErrors(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"-x", "unknown option -x"},
		{"-lx", "unknown option -x"},
		{"--leaks", "unknown option --leaks"},
		{"--compress=1", "--compress takes no value"},
		{"-s", "-s needs a value"},
		{"-s size", "needs -c"},
		{"-c -s big", `-s: unknown order "big"`},
		{"-C zz", `-C: "zz" is not a hex mask`},
		{"-R 100000000", `-R: "100000000" is not a hex mask`},
		{"-b -1", `-b: "-1" is not a frame count`},
		{"--include", "--include needs a value"},
		{"--include nofile", "--include: file does not exist"},
		{"--exclude bad", `--exclude: bad line 2: "x2" is not a call index`},
		{"--call-address libc.so", `--call-address: "libc.so" is not LIB:START+SIZE`},
		{"--call-address libc.so:10+0", `is not LIB:START+SIZE`},
		{"--call-address libc.so:ffffffffffffffff+2", `is not LIB:START+SIZE`},
		{"leaks", `unexpected argument "leaks"`},
		{"-", `unexpected argument "-"`},
	} {
		_, err := parseOptions(strings.Fields(tc.args), inP, files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

func TestParseOptionStringReadsFiles(t *testing.T) {
	path := t.TempDir() + "/keep"
	if err := os.WriteFile(path, []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ParseOptionString("-l --include " + path)
	if err != nil || !o.Leaks || !o.Include[7] {
		t.Errorf("%+v %v", o, err)
	}
	_, err = ParseOptions([]string{"--exclude", path + ".missing"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// -P "OPTS" is split as a shell splits it: a quoted file name with a
// space is one word.
func TestParseOptionStringQuotes(t *testing.T) {
	path := t.TempDir() + "/my calls.txt"
	if err := os.WriteFile(path, []byte("4\n7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ParseOptionString(`-l --include '` + path + `'`)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Leaks || !reflect.DeepEqual(o.Include, map[int]bool{4: true, 7: true}) {
		t.Errorf("got %+v", o)
	}
	if _, err := ParseOptionString(`-l --include 'unterminated`); err == nil {
		t.Error("an unterminated quote parsed")
	}
	// The function trace filters are flags of the CLI, not words of -P.
	if _, err := ParseOptionString("-F main"); err == nil {
		t.Error("-P accepted -F")
	}
}

// Each place an option may be written has one meaning per letter and
// per name: -t is sp-rtrace's no-op in -P and the time filter as a flag.
func TestOptionTable(t *testing.T) {
	for _, in := range []scope{inCLI, inP, inFunc} {
		short, long := map[byte]bool{}, map[string]bool{}
		for _, o := range options {
			if o.scope&in == 0 {
				continue
			}
			if o.Short != 0 && short[o.Short] || long[o.Long] {
				t.Errorf("scope %d: -%c/--%s defined twice", in, o.Short, o.Long)
			}
			short[o.Short], long[o.Long] = true, true
			if o.scope&inCLI != 0 && o.Usage == "" {
				t.Errorf("--%s: a flag without help", o.Long)
			}
		}
	}
	var o Options
	for _, f := range Flags() {
		val := map[string]string{"": "", "ORDER": "count", "MASK": "3", "N": "2", "FILE": "idx",
			"RANGE": "0x400000+0x10", "FUNC": "main", "TIME": "1us", "TID[,TID...]": "12", "FUNC@ACT": "main@depth=1", "COST": "peak", "KINDS": "definite,possible", "BASE": "old.rtrace", "T[,T2]": "+1,2:00"}[f.Arg]
		if f.Long == "include" || f.Long == "exclude" || f.Long == "suppressions" {
			continue // reads a file
		}
		if err := o.Set(f.Long, val); err != nil {
			t.Errorf("Set(%q, %q): %v", f.Long, val, err)
		}
	}
	want := Options{Leaks: true, Compress: true, Sort: SortCount, Resolve: true, RemoveArgs: true, Summary: true, HTML: true, Diff: "old.rtrace", At: []Moment{{T: time.Second, Rel: true, Text: "+1", ms: true}, {T: 2 * time.Minute, Text: "2:00", ms: true}}, NoBuiltin: true, Flame: CostPeak, Resource: 3,
		Funcs: FuncOptions{Filters: o.Funcs.Filters, NoTrace: o.Funcs.NoTrace, FilterOrder: []bool{false, true}, Hide: o.Funcs.Hide, Callers: o.Funcs.Callers, Triggers: o.Funcs.Triggers,
			Depth: 2, MaxStack: 2, Threshold: 1000, Tids: map[int]bool{12: true}, Disabled: true}}
	want.Context, want.Depth, want.CallAddress, want.LeakKinds = o.Context, o.Depth, o.CallAddress, o.LeakKinds
	if !reflect.DeepEqual(o, want) || o.LeakKinds == nil || *o.LeakKinds != 1<<KindDefinite|1<<KindPossible || *o.Context != 3 || *o.Depth != 2 || len(o.Funcs.Filters) != 1 || len(o.Funcs.NoTrace) != 1 || len(o.CallAddress) != 1 ||
		len(o.Funcs.Hide) != 1 || len(o.Funcs.Callers) != 1 || len(o.Funcs.Triggers) != 1 || o.Funcs.Triggers[0].Depth != 1 {
		t.Errorf("every flag set: got %+v", o)
	}
	if err := o.Set("text", ""); err == nil {
		t.Error("Set(text): sp-rtrace's -t is not a flag of the CLI")
	}
}
