package bp

// Kind is a bit-set saying what a breakpoint is for.
type Kind uint8

// Breakpoint kinds.
const (
	FuncEntry Kind = 1 << iota // entry of a traced function
	Return                     // the shared return trampoline
	Internal                   // rtrace's own (program entry point, loader rendezvous)
	Module                     // a resource function of a tracing module
	Probe                      // a USDT probe site
	Hook                       // a runtime function whose effect on the stack the tracer follows
)

// Breakpoint is one int3 planted in the tracee.
type Breakpoint struct {
	Addr uint64
	Orig byte // the byte the int3 replaced
	Kind Kind
	Plan Plan
	Func int   // index of the function in the tracer's function list, -1 if none
	Hook uint8 // for Hook: what the tracer does there (its own enumeration)
	// Site is, for Probe, the index of the probe in the tracer's list.
	Site int
}

// Table is the breakpoints of one address space, keyed by address.
type Table struct {
	bps map[uint64]*Breakpoint
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{bps: map[uint64]*Breakpoint{}} }

// Add inserts b, replacing a breakpoint at the same address.
func (t *Table) Add(b *Breakpoint) { t.bps[b.Addr] = b }

// At returns the breakpoint at addr.
func (t *Table) At(addr uint64) *Breakpoint { return t.bps[addr] }

// Remove drops the breakpoint at addr.
func (t *Table) Remove(addr uint64) { delete(t.bps, addr) }

// Len is the number of breakpoints.
func (t *Table) Len() int { return len(t.bps) }

// All calls fn for every breakpoint.
func (t *Table) All(fn func(*Breakpoint)) {
	for _, b := range t.bps {
		fn(b)
	}
}

// Clone returns a copy sharing the breakpoints (they are immutable once
// planted): a forked child starts with its parent's memory.
func (t *Table) Clone() *Table {
	c := NewTable()
	for a, b := range t.bps {
		c.bps[a] = b
	}
	return c
}
