package timeline

import (
	"io"
	"strings"
	"testing"
	"time"

	"rtrace/internal/rtext"
)

const sample = `version=1.1, arch=x86_64, timestamp=2024.3.5 07:08:09, process=./app, pid=42, backtrace depth=0, 
<1> : memory (memory allocation in bytes)
1. [07:08:09.000] malloc(100) = 0x1000
2. [07:08:09.100] malloc(20000) = 0x2000
3. [07:08:09.200] free(0x1000)
4. [07:08:10.000] malloc(100) = 0x1000
5. [07:08:11.000] free(0x2000)
`

func read(t *testing.T, o Options) *data {
	t.Helper()
	d, err := Read(rtext.NewReader(strings.NewReader(sample)), o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRead(t *testing.T) {
	d := read(t, Options{})
	if len(d.events) != 3 || d.end != 2 || d.events[0].toT != 0.2 || d.events[2].to >= 0 || d.events[2].toT != 2 {
		t.Errorf("events %+v, end %v", d.events, d.end)
	}
	// Filters: sizes, indexes, times of day and relative ones.
	for _, c := range []struct {
		o    Options
		want int
	}{
		{Options{Size: Range{Lo: 1024, Set: true}}, 1},
		{Options{Index: Range{Lo: 2, Hi: 4, Set: true}}, 2},
		{Options{Time: TimeRange{Lo: 7*time.Hour + 8*time.Minute + 9500*time.Millisecond, HasLo: true}}, 1},
		{Options{Time: TimeRange{Lo: 50 * time.Millisecond, RelLo: true, HasLo: true, Hi: 500 * time.Millisecond, RelHi: true, HasHi: true}}, 1},
	} {
		if d := read(t, c.o); len(d.events) != c.want {
			t.Errorf("%+v: %d allocations, want %d", c.o, len(d.events), c.want)
		}
	}
	p, err := read(t, Options{}).totals()
	if err != nil || !strings.Contains(p.Title.Text, "memory: peak 20.10K after 0.100s, 100B at the end") {
		t.Errorf("totals: %v %q", err, p.Title.Text)
	}
	p, _ = read(t, Options{}).histogram(false)
	if !strings.Contains(p.Title.Text, "most: 100-byte allocations, 2; 2 sizes") {
		t.Errorf("histogram: %q", p.Title.Text)
	}
}

func TestParse(t *testing.T) {
	if r, err := ParseSize("10k-1m"); err != nil || r.Lo != 10240 || r.Hi != 1<<20 {
		t.Errorf("10k-1m: %+v %v", r, err)
	}
	if r, err := ParseIndex("-7"); err != nil || r.Lo != 0 || r.Hi != 7 {
		t.Errorf("-7: %+v %v", r, err)
	}
	if r, err := ParseTime("10:00-+30"); err != nil || r.Lo != 10*time.Minute || r.RelLo || !r.RelHi || r.Hi != 30*time.Second {
		t.Errorf("10:00-+30: %+v %v", r, err)
	}
	if r, err := ParseTime("1:02:03.5-"); err != nil || r.Lo != time.Hour+2*time.Minute+3500*time.Millisecond || r.HasHi {
		t.Errorf("1:02:03.5-: %+v %v", r, err)
	}
	for _, bad := range []string{"", "-", "10", "x-", "5-3", "1:2:3:4-"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("size %q accepted", bad)
		}
		if _, err := ParseTime(bad); err == nil && bad != "x-" {
			t.Errorf("time %q accepted", bad)
		}
	}
	// One size only: the log axis has ends (gonum widened it to 0 and panicked).
	d, _ := Read(rtext.NewReader(strings.NewReader("version=1.1, arch=x86_64, timestamp=2024.3.5 07:08:09, process=./a, pid=1, \n<1> : memory (m)\n1. [07:08:09.000] malloc(1) = 0x10\n")), Options{})
	if err := d.render(io.Discard, Lifetime, "svg", Options{LogBase: 10}); err != nil {
		t.Errorf("one malloc(1): %v", err)
	}
}

// FuzzRead: any text reads and draws without a panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte(sample))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Read(rtext.NewReader(strings.NewReader(string(b))), Options{})
		if err != nil || len(d.events) == 0 {
			return
		}
		d.totals()
		d.activity(0)
		d.lifetime(10)
		d.histogram(true)
	})
}
