package uftrace

import (
	"strings"
	"testing"
)

// Every declaration of the table is read: a function's formats follow its
// types, floats count apart from integers, and C++'s operator new and
// delete are found by their demangled names.
func TestLibcTable(t *testing.T) {
	libc := Libc()
	for _, c := range []struct {
		name       string
		args, rets string
	}{
		{"mmap", "arg1/p,arg2/u,arg3/e:rt_mmap_prot,arg4/e:rt_mmap_flag,arg5/d32,arg6", "retval/p"},
		{"strtof", "arg1/s,arg2/p", "retval/f32"},
		{"qsort", "arg1/p,arg2/u,arg3/u,arg4/p", ""},
		{"getpid", "", "retval/i32"},
		{"strcpy", "arg1/p,arg2/s", ""},
		{"fgetc", "arg1/p", "retval/c"},
		{"_ZdlPvm", "arg1/x", ""}, // sized delete: operator delete
		{"_Znam", "arg1/u", "retval/x"},
		{"no_such_function", "", ""},
	} {
		join := func(specs []ArgSpec) string {
			var s []string
			for _, a := range specs {
				s = append(s, a.String())
			}
			return strings.Join(s, ",")
		}
		if a, r := join(libc.Args(c.name)), join(libc.Rets(c.name)); a != c.args || r != c.rets {
			t.Errorf("%s: %q %q, want %q %q", c.name, a, r, c.args, c.rets)
		}
	}
	if _, err := parseShown("int f(mode_t);"); err == nil {
		t.Error("a type the table does not know was taken")
	}
	if _, err := parseShown("int f(int); int f(char);"); err == nil {
		t.Error("a function declared twice was taken")
	}
}
