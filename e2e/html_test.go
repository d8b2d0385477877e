package e2e_test

import (
	"encoding/base64"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rtrace/internal/testutil"
)

// TestHTMLPage: postproc --html writes heapsum's page: the summary's
// numbers in its table (the same as --summary's, and memcheck's kinds),
// the backtraces with file:line, the four flame graphs and two timeline
// pictures embedded as SVG with their frames and numbers, the leak report
// with its kinds. Chromium, headless, renders it: the DOM holds the four
// flame graphs, and the screenshot shows the red of the lost rows.
func TestHTMLPage(t *testing.T) {
	prog := testutil.BuildC(t, "heapsum.c", "-O2", "-g")
	lines := markerLines(t, "heapsum.c")
	dir, raw := recordOneRaw(t, resModes[1], []string{"--module", "memory"}, prog)
	r := runCmd(t, dir, rtraceBin, "postproc", "--html", "-i", raw, "-o", "page.html")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "page.html"))
	page := string(b)
	sum := runCmd(t, dir, rtraceBin, "postproc", "--summary", "-i", raw).stdout
	peak := regexp.MustCompile(`peak heap memory consumption: (.*)`).FindStringSubmatch(sum)
	if peak == nil {
		t.Fatalf("summary:\n%s", sum)
	}
	for _, want := range []string{
		`<td class="k">peak heap memory consumption</td><td class="v">` + peak[1] + `</td>`,
		`<tr class="lost"><td class="k">definitely lost</td><td class="v">102,400 bytes in 50 blocks</td>`,
		fmt.Sprintf("peak() at heapsum.c:%d\n", lines["peak"]),
		"MOST TEMPORARY ALLOCATIONS\n20000 temporary allocations",
		"\t$leak = definitely lost\n# allocation summary: 50 block(s) with total size 102400\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page: no %q", want)
		}
	}
	// The pictures, decoded.
	var svgs []string
	for _, m := range regexp.MustCompile(`data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)`).FindAllStringSubmatch(html.UnescapeString(page), -1) {
		s, err := base64.StdEncoding.DecodeString(m[1])
		if err != nil {
			t.Fatal(err)
		}
		svgs = append(svgs, string(s))
	}
	if len(svgs) != 6 {
		t.Fatalf("%d pictures, want 4 flame graphs and 2 timelines", len(svgs))
	}
	for i, want := range []string{"peak (102.40K, ", "peak (15.90M, ", "temporaries (20100 temporary, ", "temporaries (20100 calls, ",
		"memory: peak " + strings.Fields(peak[1])[0], "25102 allocations: "} {
		if !strings.Contains(svgs[i], want) {
			t.Errorf("picture %d: no %q", i, want)
		}
	}

	chromium := testutil.RequireTool(t, "chromium")
	dom := runCmd(t, dir, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://"+filepath.Join(dir, "page.html"))
	if n := strings.Count(dom.stdout, `class="flame"`); n != 4 || !strings.Contains(dom.stdout, `<h2 id="leaks">Leaks</h2>`) {
		t.Errorf("chromium's DOM: %d flame graphs, want 4 and the leaks (exit %d)", n, dom.code)
	}
	shot := filepath.Join(dir, "page.png")
	runCmd(t, dir, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,900", "--screenshot="+shot, "file://"+filepath.Join(dir, "page.html"))
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if red := reddish(img); red < 50 {
		t.Errorf("the screenshot has %d red pixels: the lost rows are not drawn", red)
	}
}

// reddish counts the pixels near the page's red (#b00).
func reddish(img image.Image) int {
	n := 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 > 150 && g>>8 < 60 && b>>8 < 60 {
				n++
			}
		}
	}
	return n
}
