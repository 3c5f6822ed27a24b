package costs

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/scripts/local/browser"
)

func TestHTMLIsSelfContained(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := sampleReport(t, 7, 12).WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, banned := range []string{"<script", "src=", "href=", "@import", "url(", "<link", "<iframe"} {
		if strings.Contains(strings.ToLower(page), banned) {
			t.Errorf("page contains %q: it must render with no network", banned)
		}
	}
	// The only URL is the SVG namespace, which is never fetched.
	for _, u := range regexp.MustCompile(`https?://[^"'\s<]+`).FindAllString(page, -1) {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("page references %s", u)
		}
	}
	if n := strings.Count(page, "<svg"); n != len(ChartIDs) {
		t.Errorf("%d charts, want %d", n, len(ChartIDs))
	}
	for _, id := range ChartIDs {
		if !strings.Contains(page, `<section id="`+id+`">`) {
			t.Errorf("chart %s missing", id)
		}
	}
	for _, want := range []string{AllocationRule[:60], "retailer-03", "price table " + DefaultPrices().Version, "flushed every 5 s"} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not show %q", want)
		}
	}
}

// TestHTMLRendersInChromium opens the report in headless Chromium (Debian's
// chromium, installed on first use) with no network and checks from the
// screenshot that every chart was drawn: each chart's own data colours cover
// a real area, in page order, and the page is not blank.
func TestHTMLRendersInChromium(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin, err := browser.EnsureInstalled(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "costs.html")
	var buf bytes.Buffer
	if err := sampleReport(t, 10, 14).WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot, err := browser.Screenshot(ctx, bin, page, 1000, 2400)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if os.Getenv("CATALOG_KEEP_SCREENSHOT") != "" {
		_ = os.WriteFile(os.Getenv("CATALOG_KEEP_SCREENSHOT"), shot, 0o644)
	}

	b := img.Bounds()
	nonWhite := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 245 || g>>8 < 245 || bl>>8 < 245 {
				nonWhite++
			}
		}
	}
	if share := float64(nonWhite) / float64(b.Dx()*b.Dy()); share < 0.05 {
		t.Errorf("only %.1f%% of the page is not background: blank page?", 100*share)
	}

	type region struct {
		id                     string
		pixels                 int
		minX, minY, maxX, maxY int
	}
	var regions []region
	for _, id := range ChartIDs {
		reg := region{id: id, minX: b.Max.X, minY: b.Max.Y, maxX: -1, maxY: -1}
		cols := parseColors(t, ChartColors[id])
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if matchesAny(img, x, y, cols) {
					reg.pixels++
					reg.minX, reg.maxX = min(reg.minX, x), max(reg.maxX, x)
					reg.minY, reg.maxY = min(reg.minY, y), max(reg.maxY, y)
				}
			}
		}
		t.Logf("chart %s: %d pixels of its colours in x %d-%d, y %d-%d", id, reg.pixels, reg.minX, reg.maxX, reg.minY, reg.maxY)
		if reg.pixels < 1500 || reg.maxX-reg.minX < 150 {
			t.Errorf("chart %s: %d pixels of its data colours over %d px wide: not drawn", id, reg.pixels, reg.maxX-reg.minX)
		}
		regions = append(regions, reg)
	}
	// The charts appear in page order (their colours are where each chart is).
	if !sort.SliceIsSorted(regions, func(i, j int) bool { return regions[i].minY < regions[j].minY }) {
		t.Errorf("charts out of page order: %+v", regions)
	}
}

func parseColors(t *testing.T, hex []string) [][3]uint8 {
	t.Helper()
	var out [][3]uint8
	for _, h := range hex {
		var r, g, b uint8
		if _, err := fmt.Sscanf(h, "#%02x%02x%02x", &r, &g, &b); err != nil {
			t.Fatalf("colour %q: %v", h, err)
		}
		out = append(out, [3]uint8{r, g, b})
	}
	return out
}

func matchesAny(img image.Image, x, y int, cols [][3]uint8) bool {
	r, g, b, _ := img.At(x, y).RGBA()
	for _, c := range cols {
		if absDiff(uint8(r>>8), c[0]) <= 2 && absDiff(uint8(g>>8), c[1]) <= 2 && absDiff(uint8(b>>8), c[2]) <= 2 {
			return true
		}
	}
	return false
}

func absDiff(a, b uint8) uint8 {
	if a > b {
		return a - b
	}
	return b - a
}
