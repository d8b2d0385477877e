package elfx

import "testing"

func TestPage(t *testing.T) {
	for _, c := range []struct{ v, down, up uint64 }{
		{0, 0, 0},
		{1, 0, 0x1000},
		{0xfff, 0, 0x1000},
		{0x1000, 0x1000, 0x1000},
		{0x401136, 0x401000, 0x402000},
		{^uint64(0), ^uint64(0xfff), 0}, // the last page: PageUp wraps
	} {
		if got := PageDown(c.v); got != c.down {
			t.Errorf("PageDown(%#x) = %#x, want %#x", c.v, got, c.down)
		}
		if got := PageUp(c.v); got != c.up {
			t.Errorf("PageUp(%#x) = %#x, want %#x", c.v, got, c.up)
		}
	}
}
