package uftrace_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rtrace/internal/testutil"
	"rtrace/internal/uftrace"
)

// The built-in table of library functions shows each function uftrace
// 0.13's -a shows, with the same formats (enum names aside), and its enum
// constants have uftrace's values: checked against the argauto, retauto and
// enumauto lines uftrace record -a writes. rtrace spells three constants
// as the C library does where uftrace misspells them, and shows prctl's
// five arguments where uftrace reads each "unsigned long" as two.
func TestLibcMatchesUftrace(t *testing.T) {
	uft := testutil.RequireTool(t, "uftrace")
	prog := testutil.BuildC(t, "fib.c", "-O0", "-pg")
	dir := t.TempDir()
	testutil.Run(t, dir, uft, "record", "-a", "-d", "U", prog, "3")
	data, err := os.ReadFile(filepath.Join(dir, "U", "info"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := uftrace.ParseInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range in.ArgSpecs {
		lines[l.Key] = l.Value
	}
	libc := uftrace.Libc()
	noEnum := regexp.MustCompile(`/e:\w+`)
	for _, c := range []struct{ key, got string }{{"argauto", libc.ArgLine}, {"retauto", libc.RetLine}} {
		want := specsByName(t, noEnum.ReplaceAllString(lines[c.key], "/e"))
		got := specsByName(t, noEnum.ReplaceAllString(c.got, "/e"))
		if len(want) < 150 {
			t.Fatalf("uftrace's %s has %d functions", c.key, len(want))
		}
		if c.key == "argauto" {
			want["prctl"] = "arg1/e,arg2/u,arg3/u,arg4/u,arg5/u"
		}
		for name, w := range want {
			if g, ok := got[name]; !ok || g != w {
				t.Errorf("%s: %s %q, uftrace %q", c.key, name, g, w)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: %s is not uftrace's", c.key, name)
			}
		}
	}
	fixed := map[string]string{"LC_TYPE": "LC_CTYPE", "F_SEGSIG": "F_SETSIG", "AF_TPIC": "AF_TIPC"}
	want, got := enumConstants(t, lines["enumauto"]), enumConstants(t, libc.EnumLine)
	for name, v := range want {
		if n, ok := fixed[name]; ok {
			name = n
		}
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("enum constant %s = %d, uftrace's %d (present: %v)", name, g, v, ok)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d enum constants, uftrace has %d", len(got), len(want))
	}
}

// specsByName splits an argauto or retauto line into each function's specs.
func specsByName(t *testing.T, line string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, item := range strings.Split(line, ";") {
		name, specs, ok := strings.Cut(item, "@")
		if !ok {
			continue
		}
		out[name] = specs
	}
	return out
}

// enumConstants reads the constants of enum definitions in C ("enum X { A,
// B = 4, C };enum Y {...};"), a constant without a value following the
// previous one.
func enumConstants(t *testing.T, s string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	re := regexp.MustCompile(`enum\s+\w+\s*\{([^}]*)\}`)
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		next := int64(0)
		for _, item := range strings.Split(m[1], ",") {
			name, val, hasVal := strings.Cut(strings.TrimSpace(item), "=")
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if hasVal {
				v, err := strconv.ParseInt(strings.TrimSpace(val), 0, 64)
				if err != nil {
					t.Fatalf("enum constant %s = %q", name, val)
				}
				next = v
			}
			out[name] = next
			next++
		}
	}
	return out
}
