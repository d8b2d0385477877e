package rtext

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReader: any input decodes without panicking, and what it decodes to
// prints as text that reads back to the same text (the writer's output is
// a fixed point of read-then-write).
func FuzzReader(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "sample.txt*"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("version=2.0, pid=1, \n<1> : memory (bytes)\n<2> : fd (descriptors) [refcount]\n@ 1 : ctx\n" +
		"1. @1 [00:00:01.002] malloc<memory>(16) = 0x10\n\t$a = 1\n2. close<fd>(0x3)\n" +
		"# allocation summary: 2 block(s) with total size 16\n\t0x400 main() at x.c:3\n\n& log : /tmp/x\n## x\n"))
	f.Add([]byte("pid=1\r\n1. f(0x1)\r\n\t0x1\r\n"))
	f.Add([]byte("pid=1\n## process 42 peak RSS 4096 bytes\n## process 42 peak RSS -1 bytes\n## task 42 (pid 42) exited at 5 ns\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := decode(data)
		if err != nil {
			return
		}
		once := encode(t, items)
		again, err := decode([]byte(once))
		if err != nil {
			t.Fatalf("re-reading\n%q\n: %v", once, err)
		}
		if twice := encode(t, again); twice != once {
			t.Fatalf("not a fixed point:\n%q\nthen\n%q", once, twice)
		}
	})
}
