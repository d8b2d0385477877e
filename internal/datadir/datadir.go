// Package datadir is the last stage of a function trace: it writes the
// items of the pipeline (sessions, tasks, batches of records, events) into
// a uftrace.data directory through uftrace.Writer. The resolver stage
// before it writes the modules' .sym and .dbg files into the same
// directory.
package datadir

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"

	"rtrace/internal/trace"
	"rtrace/internal/uftrace"
)

// Writer is a trace.Writer into one uftrace.data directory. It is not
// safe for concurrent use.
type Writer struct {
	w         *uftrace.Writer
	probes    *bufio.Writer // usdt.txt, once a probe fired
	probeFile *os.File
	records   uint64
}

// Create makes the directory dir, which must not exist or be empty, with
// an info file holding the machine's facts; the recorder's own come with
// the stream's Info items.
func Create(dir string) (*Writer, error) {
	var info uftrace.Info
	uftrace.FillSystemInfo(&info)
	w, err := uftrace.Create(dir, info)
	if err != nil {
		return nil, err
	}
	return &Writer{w: w}, nil
}

// Dir is the directory written.
func (d *Writer) Dir() string { return d.w.Dir() }

// Records is how many records were written so far.
func (d *Writer) Records() uint64 { return d.records }

// Write writes one item. Items a uftrace.data directory has no place for
// (resource calls, function names) are ignored.
func (d *Writer) Write(it trace.Item) error {
	switch v := it.(type) {
	case *trace.Records:
		if err := d.w.AppendRecs(v.Tid, v.Recs); err != nil {
			return err
		}
		d.records += uint64(len(v.Recs))
		return nil
	case *trace.Session:
		return d.w.Session(uftrace.TaskEvent{Time: v.Time, Pid: v.Pid, SID: v.SID, Exename: v.Exe}, v.Maps)
	case *trace.Maps:
		return d.w.UpdateMaps(v.SID, v.Maps)
	case *trace.Task:
		switch {
		case v.Exit:
			return nil // task.txt has no line for an exit
		case v.PPid != 0:
			return d.w.Fork(v.Time, v.Pid, v.PPid)
		}
		return d.w.Task(v.Time, v.Tid, v.Pid)
	case *trace.Dlopen:
		return d.w.Dlopen(v.Time, v.Tid, v.SID, v.Base, v.Path)
	case *trace.EventName:
		return d.w.AddEvent(v.ID, v.Name)
	case *trace.Probe:
		return d.probe(v)
	case *trace.Info:
		return d.w.UpdateInfo(func(in *uftrace.Info) { merge(in, &v.Info) })
	}
	return nil
}

// merge copies into in what the recorder knows (set fields of from); the
// machine's facts, tasks and features stay the writer's.
func merge(in, from *uftrace.Info) {
	for _, f := range []struct{ to, from *string }{
		{&in.ExeName, &from.ExeName}, {&in.BuildID, &from.BuildID}, {&in.Cmdline, &from.Cmdline},
		{&in.RecordDate, &from.RecordDate}, {&in.Elapsed, &from.Elapsed}, {&in.PatternType, &from.PatternType},
		{&in.Version, &from.Version}, {&in.LoadInfo, &from.LoadInfo},
	} {
		if *f.from != "" {
			*f.to = *f.from
		}
	}
	if from.ExitStatus != nil {
		st := *from.ExitStatus
		in.ExitStatus = &st
	}
	if from.Usage != nil {
		u := *from.Usage
		in.Usage = &u
	}
	if len(from.ArgSpecs) > 0 {
		in.ArgSpecs = append([]uftrace.ArgSpecLine(nil), from.ArgSpecs...)
	}
	in.Features |= from.Features & (uftrace.FeatEstimateReturn | uftrace.FeatPerfEvent) // what the recorder chose (-e, -E linux:task-name)
}

// probe appends a probe hit to usdt.txt: uftrace 0.13 rejects user events
// carrying data, so the EVENT record holds only the id and the arguments
// live here, one line per hit: time, tid, provider:name, values.
func (d *Writer) probe(p *trace.Probe) error {
	if d.probes == nil {
		f, err := os.OpenFile(filepath.Join(d.w.Dir(), "usdt.txt"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("creating usdt.txt: %w", err)
		}
		d.probes, d.probeFile = bufio.NewWriter(f), f
		fmt.Fprintln(d.probes, "# USDT probe hits: time tid provider:name arguments (signed in decimal, unsigned 8-byte in hex)")
	}
	fmt.Fprintf(d.probes, "%s %d %s", uftrace.FormatTime(p.Time), p.Tid, p.Name)
	for _, a := range p.Args {
		fmt.Fprintf(d.probes, " %s", a)
	}
	_, err := fmt.Fprintln(d.probes)
	return err
}

// Flush writes every buffered record, leaving a directory uftrace reads
// up to here.
func (d *Writer) Flush() error {
	err := d.w.Flush()
	if d.probes != nil {
		if perr := d.probes.Flush(); err == nil {
			err = perr
		}
	}
	return err
}

// Close flushes and closes every file: the directory is complete.
func (d *Writer) Close() error {
	err := d.Flush()
	if d.probeFile != nil {
		if cerr := d.probeFile.Close(); err == nil {
			err = cerr
		}
		d.probeFile = nil
	}
	// The resolver stage wrote the .dbg files: say so in the features.
	if dbg, _ := filepath.Glob(filepath.Join(d.w.Dir(), "*.dbg")); len(dbg) > 0 {
		if uerr := d.w.UpdateInfo(func(in *uftrace.Info) { in.Features |= uftrace.FeatDebugInfo }); err == nil {
			err = uerr
		}
	}
	if cerr := d.w.Close(); err == nil {
		err = cerr
	}
	return err
}
