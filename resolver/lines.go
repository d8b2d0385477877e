package resolver

import (
	"cmp"
	"debug/dwarf"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
)

// lineRow is one row of a DWARF line table: code from addr up to the next
// row's address comes from files[file]:line. A row with file == endSeq
// ends a sequence: the addresses from it on have no line.
type lineRow struct {
	addr uint64
	line uint32
	file uint32
}

const endSeq = ^uint32(0)

// lineTable is the line tables of all compilation units of an object,
// merged and sorted by address.
type lineTable struct {
	rows  []lineRow
	files []string
	seqs  []seqSpan // while reading: the sequences in rows
}

// seqSpan is a sequence, rows[lo:hi].
type seqSpan struct{ lo, hi int }

// readLines reads the line table of every compilation unit of d. The CU
// entries and their PC ranges are returned for the inline index. Sequences
// outside the executable sections (code the linker discarded, left at
// address 0) are dropped when text is known.
func readLines(d *dwarf.Data, text []span) (*lineTable, []cuRange, error) {
	t := &lineTable{}
	fileIdx := map[string]uint32{}
	var cus []cuRange
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, nil, fmt.Errorf("reading DWARF: %w", err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagPartialUnit {
			r.SkipChildren()
			continue
		}
		if rs, err := d.Ranges(e); err == nil {
			for _, rg := range rs {
				if rg[1] > rg[0] {
					cus = append(cus, cuRange{span{rg[0], rg[1]}, e.Offset})
				}
			}
		}
		r.SkipChildren()
		lr, err := d.LineReader(e)
		if err != nil {
			return nil, nil, fmt.Errorf("reading line table: %w", err)
		}
		if lr == nil {
			continue
		}
		if err := t.addUnit(lr, fileIdx, text); err != nil {
			return nil, nil, err
		}
	}
	t.sortSequences()
	sort.Slice(cus, func(i, j int) bool { return cus[i].lo < cus[j].lo })
	return t, cus, nil
}

// sortSequences orders the rows by address. Each sequence is in order
// already and sequences do not overlap in sane DWARF, so ordering whole
// sequences by their start suffices; a stable sort of the rows is the
// fallback. Either way an end marker sorts before a row starting at the
// same address, so that the search finds the new sequence, and rows of one
// address keep their order: the last wins (the earlier have no code).
func (t *lineTable) sortSequences() {
	sort.SliceStable(t.seqs, func(i, j int) bool { return t.rows[t.seqs[i].lo].addr < t.rows[t.seqs[j].lo].addr })
	rows := make([]lineRow, 0, len(t.rows))
	for _, q := range t.seqs {
		rows = append(rows, t.rows[q.lo:q.hi]...)
	}
	t.rows, t.seqs = rows, nil
	if slices.IsSortedFunc(rows, cmpRows) {
		return
	}
	slices.SortStableFunc(rows, cmpRows)
}

func cmpRows(a, b lineRow) int {
	switch {
	case a.addr != b.addr:
		return cmp.Compare(a.addr, b.addr)
	case a.file == endSeq && b.file != endSeq:
		return -1
	case b.file == endSeq && a.file != endSeq:
		return 1
	}
	return 0
}

// addUnit appends one unit's sequences.
func (t *lineTable) addUnit(lr *dwarf.LineReader, fileIdx map[string]uint32, text []span) error {
	var seq []lineRow
	var le dwarf.LineEntry
	for {
		err := lr.Next(&le)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading line table: %w", err)
		}
		if le.EndSequence {
			if len(seq) > 0 && inText(text, seq[0].addr) {
				lo := len(t.rows)
				t.rows = append(t.rows, seq...)
				t.rows = append(t.rows, lineRow{addr: le.Address, file: endSeq})
				t.seqs = append(t.seqs, seqSpan{lo, len(t.rows)})
			}
			seq = seq[:0]
			continue
		}
		name := ""
		if le.File != nil {
			name = le.File.Name
		}
		idx, ok := fileIdx[name]
		if !ok {
			idx = uint32(len(t.files))
			fileIdx[name] = idx
			t.files = append(t.files, name)
		}
		seq = append(seq, lineRow{addr: le.Address, line: uint32(max(le.Line, 0)), file: idx})
	}
}

// inText reports whether pc lies in one of the executable sections; with
// none known, every address does.
func inText(text []span, pc uint64) bool {
	if len(text) == 0 {
		return true
	}
	i := sort.Search(len(text), func(i int) bool { return text[i].lo > pc }) - 1
	return i >= 0 && pc < text[i].hi
}

// lookup returns the source position of pc, line 0 when unknown.
func (t *lineTable) lookup(pc uint64) (file string, line int) {
	if t == nil {
		return "", 0
	}
	i := sort.Search(len(t.rows), func(i int) bool { return t.rows[i].addr > pc }) - 1
	if i < 0 || t.rows[i].file == endSeq || t.rows[i].line == 0 {
		return "", 0
	}
	return t.files[t.rows[i].file], int(t.rows[i].line)
}
