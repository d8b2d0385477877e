package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// A script is traced through what it runs: the programs its commands
// start, each as when recorded alone, and nothing of the shell itself,
// whether the kernel or env(1) starts the shell. `rtrace SCRIPT` (live)
// shows them too.
func TestRecordScript(t *testing.T) {
	chain := testutil.BuildC(t, "chain.c", "-O0", "-g")
	fib := testutil.BuildC(t, "fib.c", "-O0", "-g")
	tmp := t.TempDir()
	var want []string
	for i, p := range [][]string{{chain}, {fib, "4"}} {
		dir := filepath.Join(tmp, "alone"+string(rune('0'+i)))
		if r := runCmd(t, tmp, rtraceBin, append([]string{"record", "-q", "-d", dir, "--"}, p...)...); r.code != 0 && r.code != 18%7 {
			t.Fatalf("%v: %+v", p, r)
		}
		want = append(want, tree(replay(t, dir))...)
	}
	slices.Sort(want)
	body := chain + " || echo chain $?\n" + fib + " 4\necho done\n"
	for _, shebang := range []string{"#!/bin/sh", "#!/usr/bin/env sh"} {
		t.Run(shebang, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "run.sh")
			if err := os.WriteFile(script, []byte(shebang+"\n"+body), 0o755); err != nil {
				t.Fatal(err)
			}
			r := runCmd(t, dir, rtraceBin, "record", "-d", "S", "./run.sh")
			if r.code != 0 || !strings.Contains(r.stdout, "chain 18\nchain 4\n") || !strings.HasSuffix(r.stdout, "done\n") {
				t.Fatalf("rtrace record ./run.sh: %+v", r)
			}
			got := tree(replay(t, filepath.Join(dir, "S")))
			slices.Sort(got)
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("the script's trace:\n%s\nits programs alone:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			r = runCmd(t, dir, rtraceBin, "-D1", "--no-pager", "./run.sh")
			if r.code != 0 || strings.Count(r.stdout, "main();") != 2 {
				t.Errorf("rtrace -D1 ./run.sh: %+v", r)
			}
		})
	}
}
