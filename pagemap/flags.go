package pagemap

import (
	"fmt"
	"strings"
)

// The kernel's page flags (/proc/kpageflags; the kernel's
// include/uapi/linux/kernel-page-flags.h) with the marks and names of its
// page-types tool (tools/mm/page-types.c), which sp-rtrace-pagemap's
// summary uses. Bits 48 and up are page-types' own: overloaded flags
// told apart.
var pageFlags = map[int]struct {
	mark byte
	name string
}{
	0: {'L', "locked"}, 1: {'E', "error"}, 2: {'R', "referenced"}, 3: {'U', "uptodate"},
	4: {'D', "dirty"}, 5: {'l', "lru"}, 6: {'A', "active"}, 7: {'S', "slab"},
	8: {'W', "writeback"}, 9: {'I', "reclaim"}, 10: {'B', "buddy"}, 11: {'M', "mmap"},
	12: {'a', "anonymous"}, 13: {'s', "swapcache"}, 14: {'b', "swapbacked"}, 15: {'H', "compound_head"},
	16: {'T', "compound_tail"}, 17: {'G', "huge"}, 18: {'u', "unevictable"}, 19: {'X', "hwpoison"},
	20: {'n', "nopage"}, 21: {'x', "ksm"}, 22: {'t', "thp"}, 23: {'o', "offline"},
	24: {'z', "zero_page"}, 25: {'i', "idle_page"}, 26: {'g', "pgtable"},
	32: {'r', "reserved"}, 33: {'m', "mlocked"}, 34: {'d', "mappedtodisk"}, 35: {'P', "private"},
	36: {'p', "private_2"}, 37: {'O', "owner_private"}, 38: {'h', "arch"}, 39: {'c', "uncached"},
	40: {'f', "softdirty"}, 41: {'H', "arch_2"},
	48: {'I', "readahead"}, 49: {'P', "slob_free"}, 50: {'A', "slub_frozen"}, 51: {'E', "slub_debug"},
}

func flagMark(i int) byte {
	if f, ok := pageFlags[i]; ok {
		return f.mark
	}
	return '?'
}

func flagName(i int) string {
	if f, ok := pageFlags[i]; ok {
		return f.name
	}
	return "unknown"
}

// Flag bits filterFlags reads (kernel-page-flags.h).
const (
	kpfError        = 1
	kpfActive       = 6
	kpfSlab         = 7
	kpfWriteback    = 8
	kpfReclaim      = 9
	kpfCompoundHead = 15
	kpfCompoundTail = 16
	kpfHuge         = 17
	kpfPrivate      = 35
	kpfReadahead    = 48
	kpfSlobFree     = 49
	kpfSlubFrozen   = 50
	kpfSlubDebug    = 51
	hackersBits     = uint64(0xffff) << 32
)

// filterFlags is page-types' view of a page's flags: the overloaded
// ones told apart (expand_overloaded_flags), the kernel hackers' bits
// left out, and the compound bits kept only on huge pages
// (well_known_flags), as sp-rtrace-pagemap counted them.
func filterFlags(f uint64) uint64 {
	move := func(from, to int) {
		if f&(1<<from) != 0 {
			f &^= 1 << from
			f |= 1 << to
		}
	}
	if f&(1<<kpfSlab) != 0 {
		move(kpfPrivate, kpfSlobFree)
		move(kpfActive, kpfSlubFrozen)
		move(kpfError, kpfSlubDebug)
	}
	if f&(1<<kpfReclaim|1<<kpfWriteback) == 1<<kpfReclaim {
		move(kpfReclaim, kpfReadahead)
	}
	f &^= hackersBits
	if f&(1<<kpfCompoundHead|1<<kpfCompoundTail) != 0 && f&(1<<kpfHuge) == 0 {
		f &^= 1<<kpfCompoundHead | 1<<kpfCompoundTail
	}
	return f
}

// FlagHelp lists the marks of the summary, sp-rtrace-pagemap's
// --help-pages.
func FlagHelp() string {
	var b strings.Builder
	b.WriteString("Page type flags (the kernel's /proc/kpageflags, as page-types marks them):\n\n")
	for i := 0; i < 64; i++ {
		if f, ok := pageFlags[i]; ok {
			fmt.Fprintf(&b, "  %c  bit %2d  %s\n", f.mark, i, f.name)
		}
	}
	return b.String()
}
