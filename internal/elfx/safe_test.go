package elfx

import (
	"debug/dwarf"
	"errors"
	"testing"
)

// Guard stops a panic of debug/dwarf and lets any other one go on.
func TestGuard(t *testing.T) {
	err := Guard(func() error {
		var d *dwarf.Data
		d.Reader() // a nil dereference inside debug/dwarf
		return nil
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("panic in debug/dwarf: %v, want ErrCorrupt", err)
	}
	want := errors.New("plain")
	if err := Guard(func() error { return want }); err != want {
		t.Errorf("plain error: %v", err)
	}
	defer func() {
		if p := recover(); p != "a bug" {
			t.Errorf("a panic outside the readers: recovered %v", p)
		}
	}()
	Guard(func() error { panic("a bug") })
	t.Error("Guard stopped a panic outside the readers")
}
