package suite

import (
	"slices"
	"time"
)

// Stats summarises the samples of several runs of one command.
type Stats struct {
	Runs          int
	Wall, CPU     time.Duration // medians
	WallMin       time.Duration
	WallMax       time.Duration
	RSS           int64 // median, bytes
	Bytes         int64 // trace bytes written (the last run's)
	Events        int64 // traced events (the last run's), 0: not counted
	Err           error // why there are no samples
	Skipped       string
	Check, Detail string // correctness: "ok", "differs", ""; and why
}

// Summarise computes the medians and the range of samples.
func Summarise(samples []Sample) Stats {
	s := Stats{Runs: len(samples)}
	if len(samples) == 0 {
		return s
	}
	walls := make([]time.Duration, len(samples))
	cpus := make([]time.Duration, len(samples))
	rss := make([]int64, len(samples))
	for i, x := range samples {
		walls[i], cpus[i], rss[i] = x.Wall, x.CPU, x.RSS
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	slices.Sort(rss)
	s.Wall, s.CPU, s.RSS = median(walls), median(cpus), median(rss)
	s.WallMin, s.WallMax = walls[0], walls[len(walls)-1]
	return s
}

// median of a sorted slice: the middle value, or the mean of the two.
func median[T time.Duration | int64](sorted []T) T {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
