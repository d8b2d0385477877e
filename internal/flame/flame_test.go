package flame

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"testing"
)

type svg struct {
	Frames []struct {
		Class string `xml:"class,attr"`
		Title string `xml:"title"`
		Rect  struct {
			X     string `xml:"x,attr"`
			Y     string `xml:"y,attr"`
			Width string `xml:"width,attr"`
		} `xml:"rect"`
		Text string `xml:"text"`
	} `xml:"g"`
	Script string `xml:"script"`
}

// TestWrite: the frames of merged stacks, each as wide as its cost's
// share, its callees above it in name order, its title naming it with its
// cost and share; valid XML with the zoom script inside.
func TestWrite(t *testing.T) {
	var b bytes.Buffer
	err := Write(&b, Graph{Title: "t <1>", Unit: func(v uint64) string { return strconv.FormatUint(v, 10) + "B" }}, []Stack{
		{Frames: []string{"main", "parse"}, Value: 3},
		{Frames: []string{"main", "emit<int>"}, Value: 1},
		{Frames: []string{"main", "never"}, Value: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	var doc svg
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b.String())
	}
	type frame struct {
		title    string
		x, y, wd float64
	}
	var got []frame
	for _, g := range doc.Frames {
		x, _ := strconv.ParseFloat(g.Rect.X, 64)
		y, _ := strconv.ParseFloat(g.Rect.Y, 64)
		w, _ := strconv.ParseFloat(g.Rect.Width, 64)
		got = append(got, frame{g.Title, x, y, w})
	}
	want := []string{"all (4B, 100.00%)", "main (4B, 100.00%)", "emit<int> (1B, 25.00%)", "parse (3B, 75.00%)"}
	if len(got) != len(want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
	for i := range want {
		if got[i].title != want[i] {
			t.Errorf("frame %d: %q, want %q", i, got[i].title, want[i])
		}
	}
	all, main, emit, parse := got[0], got[1], got[2], got[3]
	if main.wd != all.wd || emit.wd*3 != parse.wd || emit.wd+parse.wd != main.wd {
		t.Errorf("widths: all %v main %v emit %v parse %v", all.wd, main.wd, emit.wd, parse.wd)
	}
	if !(main.y < all.y && emit.y < main.y && emit.y == parse.y && emit.x < parse.x && parse.x == emit.x+emit.wd) {
		t.Errorf("places: %+v", got)
	}
	if !bytes.Contains(b.Bytes(), []byte("t &lt;1&gt;")) || doc.Script == "" {
		t.Errorf("title not escaped, or no script:\n%s", b.String())
	}
}

// TestWriteOddNames: names with control characters, bad UTF-8 and
// characters cut by a narrow frame still make well-formed XML.
func TestWriteOddNames(t *testing.T) {
	var b bytes.Buffer
	long := "a" + string(bytes.Repeat([]byte("é"), 40))
	if err := Write(&b, Graph{Title: "x\x01"}, []Stack{
		{Frames: []string{long}, Value: 1},
		{Frames: []string{"bad\xff\x01name"}, Value: 1000},
	}); err != nil {
		t.Fatal(err)
	}
	var doc svg
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v", err)
	}
}
