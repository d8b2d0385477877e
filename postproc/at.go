package postproc

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"rtrace/internal/trace"
	"rtrace/timeline"
)

// The summary at a moment (--summary --at T; docs/REPORTS.md, "Diff"):
// the trace read up to T, its blocks then live taking the leaks' place;
// with two moments, what changed between them in one trace, bytehound's
// "what grew".

// Moment is a time in a trace: from its first memory call (Rel), else a
// time of day; Text is as the user spelled it.
type Moment struct {
	T    time.Duration
	Rel  bool
	Text string
	// ms: given to the millisecond or coarser, as the text format's
	// times: a call's time counts to the millisecond, so a raw trace and
	// its text cut at one moment alike.
	ms bool
}

// ParseMoments reads T or T,T2, each [+][HH:][MM:]SS[.sss]; the second
// must not be before the first when both are of one kind.
func ParseMoments(s string) ([]Moment, error) {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%q: want one moment T or two, T,T2", s)
	}
	var ms []Moment
	for _, p := range parts {
		t, rel, err := timeline.ParseStamp(p)
		if err != nil {
			return nil, err
		}
		_, frac, _ := strings.Cut(p, ".")
		ms = append(ms, Moment{T: t, Rel: rel, Text: p, ms: len(frac) <= 3})
	}
	if len(ms) == 2 && ms[0].Rel == ms[1].Rel && ms[1].T < ms[0].T {
		return nil, fmt.Errorf("%q: the second moment is before the first", s)
	}
	return ms, nil
}

// after reports whether the memory call c of s is after the moment m.
func (m Moment) after(s *heapSummary, c *trace.Call) bool {
	if c.Time < 0 || !s.memory[c.Res] {
		return false
	}
	t := c.Time
	if m.Rel {
		if !s.startSet {
			return m.T < 0
		}
		t = s.ofDay(t) - s.start
	}
	if m.ms {
		t = t.Truncate(time.Millisecond)
	}
	return t > m.T
}

// errNoTimes: a moment was given for a trace whose calls have no times.
var errNoTimes = errors.New("the trace's memory calls have no times (an sp-rtrace text trace written without them?): --at needs them")
