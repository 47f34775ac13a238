package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reportSeries are the series the page draws: answers by source, breaker
// bands per tier, latency against the deadline, upstream calls per tier,
// streams completed and incomplete.
var reportSeries = []string{
	"answers/pro", "answers/legacy", "answers/flash", "answers/cache", "answers/default", "answers/error",
	"breaker/pro/closed", "breaker/pro/open", "breaker/legacy/retired", "breaker/flash/closed",
	"latency/p50", "latency/p99", "latency/deadline",
	"calls/pro", "calls/legacy", "calls/flash",
	"streams/completed", "streams/incomplete",
	"bothdown/exact", "bothdown/semantic", "bothdown/simplified",
}

// The report is one self-contained page that a real browser renders
// without a script error, with every series and the phases drawn. The
// screenshot stays in TIERGUARD_ARTIFACTS.
func TestReportInChromium(t *testing.T) {
	chromium := requireBinary(t, skipBrowserEnv, "chromium", "chromium-browser")
	cfg := shortConfig()
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	bd, err := runBothDown(context.Background(), cfg, 400*time.Millisecond)
	require.NoError(t, err)
	var page bytes.Buffer
	require.NoError(t, sum.writeReport(&page, bd))
	html := page.String()

	// Charts scale to the window: a viewBox, no fixed size; every axis
	// has a title; the page shows no test text.
	svgs := regexp.MustCompile(`<svg [^>]*>`).FindAllString(html, -1)
	require.Len(t, svgs, 6, "five charts of the story and one of both models down")
	for _, tag := range svgs {
		assert.Contains(t, tag, "viewBox=")
		assert.NotRegexp(t, regexp.MustCompile(`\s(width|height)=`), tag, "no fixed size: %s", tag)
	}
	assert.GreaterOrEqual(t, strings.Count(html, `class="axis-title"`), 11, "a time axis title per chart, a value axis title per chart but the bands")
	assert.Contains(t, html, "time since both models went down")
	assert.NotContains(t, html, "series drawn")
	assert.Contains(t, html, "model retired: skipped without a call")

	// Self-contained: nothing to fetch.
	for _, re := range []string{`(?i)https?://`, `(?i)\bsrc\s*=`, `(?i)<link\b`, `(?i)@import`, `(?i)url\(`, `(?i)\bhref\s*=`} {
		assert.NotRegexp(t, regexp.MustCompile(re), html, "the page loads nothing")
	}
	for _, s := range reportSeries {
		assert.Contains(t, html, `data-series="`+s+`"`)
	}
	assert.Contains(t, html, `data-phase="pro 503 outage"`)
	assert.Contains(t, html, `data-phase="pro 429 storm"`)

	dir := artifactsDir(t)
	file := filepath.Join(dir, "outage-report.html")
	require.NoError(t, os.WriteFile(file, page.Bytes(), 0o644))
	shot := filepath.Join(dir, "outage-report.png")
	_ = os.Remove(shot)

	// One run prints the DOM after the script ran, with the console on
	// stderr; another takes the screenshot.
	dom, console := runChromium(t, chromium, "--dump-dom", "file://"+file)
	assert.NotContains(t, console, "Uncaught", "no script error")
	assert.NotRegexp(t, regexp.MustCompile(`:ERROR:CONSOLE`), console)
	assert.Contains(t, dom, `data-rendered="true"`, "the page's script ran")
	m := regexp.MustCompile(`data-series="([^"]*)"`).FindStringSubmatch(dom[strings.Index(dom, "<body"):])
	require.NotNil(t, m, "the script listed the series it found")
	drawn := strings.Fields(m[1])
	for _, s := range reportSeries {
		assert.Contains(t, drawn, s, "drawn in the browser")
	}
	assert.NotContains(t, dom, "series drawn", "the page shows no test text")

	_, console = runChromium(t, chromium, "--screenshot="+shot, "--window-size=1010,1300", "--hide-scrollbars", "file://"+file)
	assert.NotContains(t, console, "Uncaught")
	f, err := os.Open(shot)
	require.NoError(t, err, "the screenshot was written")
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	b := img.Bounds()
	assert.Equal(t, 1010, b.Dx())
	// The charts put colour on the page: count the pixels far from white.
	coloured := 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 200 || g>>8 < 200 || bl>>8 < 200 {
				coloured++
			}
		}
	}
	assert.Greater(t, coloured, 2000, "the charts are drawn")
	t.Logf("screenshot: %s", shot)
}

// runChromium runs headless Chromium once with a fresh profile and no
// network activity of its own, and returns its stdout and stderr.
func runChromium(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	profile := t.TempDir()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--no-default-browser-check", "--user-data-dir=" + profile,
		"--enable-logging=stderr", "--log-level=0"}
	var out, errs bytes.Buffer
	cmd := exec.Command(bin, append(base, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	cmd.Env = append(os.Environ(), "HOME="+profile)
	p := startProcess(t, cmd)
	require.NoError(t, p.wait(60*time.Second), "chromium: %s", errs.String())
	return out.String(), errs.String()
}
