package main

import (
	"slices"
	"testing"
)

// Which command lines go to uftrace's reader (record, live, a program)
// and which to urfave's verbs.
func TestUftraceVerb(t *testing.T) {
	for _, c := range []struct {
		args []string
		verb string
		rest []string
		ok   bool
	}{
		{[]string{"rtrace", "record", "-D3", "./p"}, "record", []string{"-D3", "./p"}, true},
		{[]string{"rtrace", "-v", "record", "./p"}, "record", []string{"-v", "./p"}, true},
		{[]string{"rtrace", "-D", "3", "live", "p"}, "live", []string{"-D", "3", "p"}, true},
		{[]string{"rtrace", "-D3", "./p", "x"}, "", []string{"-D3", "./p", "x"}, true},
		{[]string{"rtrace", "./p"}, "", []string{"./p"}, true},
		{[]string{"rtrace", "--usage"}, "", []string{"--usage"}, true},
		{[]string{"rtrace", "--opt", "f"}, "", []string{"--opt", "f"}, true},
		{[]string{"rtrace", "postproc", "-i", "x"}, "", nil, false},
		{[]string{"rtrace", "-v", "attach", "1"}, "", nil, false},
		{[]string{"rtrace", "--help"}, "", nil, false},
		{[]string{"rtrace", "-V"}, "", nil, false},
		{[]string{"rtrace"}, "", nil, false},
	} {
		verb, rest, ok := uftraceVerb(c.args)
		if verb != c.verb || !slices.Equal(rest, c.rest) || ok != c.ok {
			t.Errorf("uftraceVerb(%q) = %q, %q, %v; want %q, %q, %v", c.args, verb, rest, ok, c.verb, c.rest, c.ok)
		}
	}
}

func TestHelpArgs(t *testing.T) {
	for _, c := range []struct {
		args, want []string
		err        bool
	}{
		{[]string{"rtrace", "help"}, []string{"rtrace", "--help"}, false},
		{[]string{"rtrace", "-v", "help"}, []string{"rtrace", "--help"}, false},
		{[]string{"rtrace", "help", "record"}, []string{"rtrace", "record", "--help"}, false},
		{[]string{"rtrace", "help", "postproc"}, []string{"rtrace", "postproc", "--help"}, false},
		{[]string{"rtrace", "help", "ls"}, nil, true},
		{[]string{"rtrace", "help", "record", "live"}, nil, true},
		{[]string{"rtrace", "record", "help"}, []string{"rtrace", "record", "help"}, false},
		{[]string{"rtrace"}, []string{"rtrace"}, false},
	} {
		got, err := helpArgs(c.args)
		if !slices.Equal(got, c.want) || (err != nil) != c.err {
			t.Errorf("helpArgs(%q) = %q, %v; want %q, error %v", c.args, got, err, c.want, c.err)
		}
	}
}
