package cxxname

import "testing"

func TestShort(t *testing.T) {
	// The forms uftrace 0.13 shows for these symbols (launcher's C++ and
	// exception fixtures, libstdc++).
	for sym, want := range map[string]string{
		"_ZN3geo5ShapeC2Ei":      "geo::Shape::Shape",
		"_ZN3geo5twiceIiEET_S1_": "geo::twice",
		"_ZN5GuardD2Ev":          "Guard::~Guard",
		"_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC2IS3_EEPKcRKS3_": "std::__cxx11::basic_string::basic_string",
		"_ZN3geo5Shape4areaEv.cold": "geo::Shape::area",
		"main":                      "main",
		"_Z":                        "_Z",
		"_Zbogus":                   "_Zbogus",
	} {
		if got := Short(sym); got != want {
			t.Errorf("Short(%q) = %q, want %q", sym, got, want)
		}
	}
}

func TestFull(t *testing.T) {
	for sym, want := range map[string]string{
		"_ZNK3geo5Shape4areaEv":  "geo::Shape::area() const",
		"_ZN4util5inner5countEi": "util::inner::count(int)",
		"_Zbogus":                "",
		"main":                   "",
	} {
		if got, ok := Full(sym); got != want || ok != (want != "") {
			t.Errorf("Full(%q) = %q, %v; want %q", sym, got, ok, want)
		}
	}
}

func FuzzShort(f *testing.F) {
	f.Add("_ZN3geo5twiceIiEET_S1_")
	f.Add("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC2IS3_EEPKcRKS3_")
	f.Fuzz(func(t *testing.T, s string) {
		if Short(s) == "" && s != "" {
			t.Fatalf("Short(%q) is empty", s)
		}
		if name, ok := Full(s); ok && name == "" {
			t.Fatalf("Full(%q) is empty", s)
		}
	})
}
