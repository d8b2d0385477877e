package resolver

import (
	"testing"
)

// BenchmarkFrame resolves the fixture's return addresses over and over, as
// a trace with repeated backtraces does: after the first, each is a cached
// answer.
func BenchmarkFrame(b *testing.B) {
	run := runFixture(b, fixtureBuilds[1])
	r := run.resolver(Options{}, nil)
	addrs := benchAddrs(run)
	for i := 0; b.Loop(); i++ {
		r.Frame(addrs[i%len(addrs)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkFrameUncached resolves without the answer cache: the mapping
// search, symbol and line binary searches, inline lookup and formatting.
func BenchmarkFrameUncached(b *testing.B) {
	run := runFixture(b, fixtureBuilds[1])
	r := run.resolver(Options{}, nil)
	addrs := benchAddrs(run)
	for _, a := range addrs {
		r.Frame(a) // read the modules
	}
	for i := 0; b.Loop(); i++ {
		r.frame(addrs[i%len(addrs)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkLoad reads the fixture program and library: the one-time cost
// per module.
func BenchmarkLoad(b *testing.B) {
	run := runFixture(b, fixtureBuilds[1])
	addrs := benchAddrs(run)
	for b.Loop() {
		r := run.resolver(Options{}, nil)
		for _, a := range addrs {
			r.Frame(a)
		}
	}
}

func benchAddrs(run *fixtureRun) []uint64 {
	var addrs []uint64
	for _, a := range run.rets {
		addrs = append(addrs, a)
	}
	return addrs
}
