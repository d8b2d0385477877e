package usdt

import (
	"debug/elf"
	"fmt"
	"testing"

	"rtrace/internal/testutil"
)

func TestParseArgs(t *testing.T) {
	regs := map[string]uint64{"rdi": 0xffffffff_fffffffb, "rsi": 0x1234_5678_9abc_def0, "rbp": 0x1000, "rax": 0x2000, "rbx": 3}
	mem := map[uint64]uint64{0x1000 - 8: 0xfffffffe, 0x2000 + 16 + 24: 42}
	reg := func(r string) uint64 { return regs[r] }
	read := func(addr uint64, size int) (uint64, error) {
		v, ok := mem[addr]
		if !ok {
			return 0, fmt.Errorf("unmapped %#x", addr)
		}
		return v, nil
	}
	for _, c := range []struct{ op, want string }{
		{"-4@%edi", "-5"},
		{"4@%edi", "4294967291"},
		{"8@%rsi", "0x123456789abcdef0"},
		{"-1@%sil", "-16"},
		{"-4@$5", "5"},
		{"-4@$-5", "-5"},
		{"-4@-8(%rbp)", "-2"},
		{"8@16(%rax,%rbx,8)", "0x2a"},
	} {
		args, err := ParseArgs(c.op)
		if err != nil || len(args) != 1 {
			t.Errorf("%s: %v %v", c.op, args, err)
			continue
		}
		v, err := args[0].Value(reg, read)
		if got := args[0].Format(v); err != nil || got != c.want {
			t.Errorf("%s = %s (%v), want %s", c.op, got, err, c.want)
		}
	}
	for _, bad := range []string{"4%edi", "3@%edi", "4@%xyz", "4@%ah", "4@5", "4@(%rax", "8@8(%rax,%rip)", "8@8(%rax,%rbx,3)", "x@%eax"} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	// A symbol operand parses but has no value: the tracer warns once.
	args, err := ParseArgs("8@counter(%rip)")
	if err != nil || args[0].Sym != "counter" {
		t.Fatalf("%v %v", args, err)
	}
	if _, err := args[0].Value(reg, read); err == nil {
		t.Error("symbol operand: no error")
	}
}

func TestProbesOfFixture(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		f, err := elf.Open(testutil.BuildC(t, "usdt.c", "-g", opt))
		if err != nil {
			t.Fatal(err)
		}
		ps, err := Probes(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]Probe{}
		for _, p := range ps {
			got[p.FullName()] = p
			if _, err := ParseArgs(p.Args); err != nil {
				t.Errorf("%s %s: %v", opt, p.FullName(), err)
			}
		}
		if len(got) != 5 || got["app:guarded"].Semaphore == 0 || got["app:step"].Semaphore != 0 || got["app:start"].PC == 0 {
			t.Errorf("%s: probes %+v", opt, ps)
		}
		if !got["app:step"].Match("app:*") || got["app:step"].Match("other:*") || !got["app:done"].Match("done") {
			t.Errorf("Match")
		}
	}
}

func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{"-4@%edi 8@-8(%rbp)", "-4@$5", "8@16(%rax,%rbx,8)", "8@foo(%rip)", "1@%r8b -2@(%r9)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args, _ := ParseArgs(s)
		for _, a := range args {
			v, err := a.Value(func(string) uint64 { return 1 }, func(uint64, int) (uint64, error) { return 2, nil })
			if err == nil {
				a.Format(v)
			}
		}
	})
}
