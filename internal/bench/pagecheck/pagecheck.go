// Package pagecheck renders an HTML report in headless Chromium and
// measures its layout: the page's scroll width against the window's, every
// plot (svg) inside the page with all its text, and every legend entry
// inside its plot, apart from the others and from the plot's axes. The report tests use it when a Chromium binary
// is on PATH; it is not part of streamgate itself.
package pagecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// Browser returns the path of a Chromium binary on PATH (chromium,
// chromium-browser, google-chrome), or "" when there is none.
func Browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Layout is what the browser measured of a page.
type Layout struct {
	InnerWidth   int      `json:"innerWidth"`   // the window's width
	ClientWidth  int      `json:"clientWidth"`  // the page's visible width (without a scrollbar)
	ScrollWidth  int      `json:"scrollWidth"`  // document.scrollingElement.scrollWidth
	ScrollHeight int      `json:"scrollHeight"` // the page's full height
	Plots        int      `json:"plots"`        // svg elements
	Legends      int      `json:"legends"`      // legend entries over all plots
	Tables       int      `json:"tables"`
	Problems     []string `json:"problems"` // each element outside the page, each overlap
}

// measureJS runs after the page has been laid out and appends its findings
// as JSON in <pre id="pagecheck">.
const measureJS = `<script>(function(){
const se = document.scrollingElement, right = se.clientWidth;
const out = {innerWidth: innerWidth, clientWidth: se.clientWidth, scrollWidth: se.scrollWidth,
  scrollHeight: se.scrollHeight, plots: 0, legends: 0, tables: 0, problems: []};
const px = v => Math.round(v);
const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
document.querySelectorAll('svg').forEach((svg, i) => {
  out.plots++;
  const name = svg.getAttribute('aria-label') || 'svg ' + i;
  const r = svg.getBoundingClientRect();
  if (r.left < 0 || r.right > right + 0.5) out.problems.push('plot "' + name + '" spans ' + px(r.left) + '..' + px(r.right) + ' px, past the page width ' + right);
  const legends = [...svg.querySelectorAll('g.legend')].map(g => ({name: g.textContent, r: g.getBoundingClientRect()}));
  const frame = svg.querySelector('rect.frame');
  const axes = [...svg.querySelectorAll('text')].filter(t => !t.closest('g.legend')).map(t => ({name: t.textContent, r: t.getBoundingClientRect()}));
  axes.forEach(x => {
    if (x.r.left < r.left - 0.5 || x.r.right > r.right + 0.5 || x.r.top < r.top - 0.5 || x.r.bottom > r.bottom + 0.5)
      out.problems.push('text "' + x.name + '" of "' + name + '" is cut off at the plot\'s edge');
  });
  if (frame) axes.push({name: 'the plot area', r: frame.getBoundingClientRect()});
  legends.forEach((a, j) => {
    out.legends++;
    if (a.r.left < r.left - 0.5 || a.r.right > r.right + 0.5 || a.r.top < r.top - 0.5 || a.r.bottom > r.bottom + 0.5)
      out.problems.push('legend "' + a.name + '" of "' + name + '" spans ' + px(a.r.left) + '..' + px(a.r.right) + ' x ' + px(a.r.top) + '..' + px(a.r.bottom) + ', outside its plot ' + px(r.left) + '..' + px(r.right) + ' x ' + px(r.top) + '..' + px(r.bottom));
    axes.forEach(x => { if (overlap(a.r, x.r)) out.problems.push('legend "' + a.name + '" of "' + name + '" overlaps ' + (x.name === 'the plot area' ? x.name : 'the text "' + x.name + '"')); });
    legends.slice(0, j).forEach(b => { if (overlap(a.r, b.r)) out.problems.push('legends "' + b.name + '" and "' + a.name + '" of "' + name + '" overlap'); });
  });
});
document.querySelectorAll('table').forEach((t, i) => {
  out.tables++;
  const r = t.getBoundingClientRect();
  if (r.left < 0 || r.right > right + 0.5) out.problems.push('table ' + (i + 1) + ' spans ' + px(r.left) + '..' + px(r.right) + ' px, past the page width ' + right);
});
const pre = document.createElement('pre');
pre.id = 'pagecheck';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
})();</script>`

var resultRe = regexp.MustCompile(`<pre id="pagecheck">([^<]*)</pre>`)

// Measure loads the HTML file page in headless Chromium (browser) with a
// window width px wide and returns its layout.
func Measure(ctx context.Context, browser, page string, width int) (*Layout, error) {
	src, err := os.ReadFile(page)
	if err != nil {
		return nil, fmt.Errorf("pagecheck: %w", err)
	}
	i := bytes.LastIndex(src, []byte("</body>"))
	if i < 0 {
		return nil, fmt.Errorf("pagecheck: %s has no </body>", page)
	}
	dir, err := os.MkdirTemp("", "pagecheck-")
	if err != nil {
		return nil, fmt.Errorf("pagecheck: %w", err)
	}
	defer os.RemoveAll(dir)
	probe := filepath.Join(dir, "page.html")
	withJS := append(append(append([]byte{}, src[:i]...), measureJS...), src[i:]...)
	if err := os.WriteFile(probe, withJS, 0o644); err != nil {
		return nil, fmt.Errorf("pagecheck: %w", err)
	}
	out, err := run(ctx, browser, dir, "--window-size="+strconv.Itoa(width)+",900", "--dump-dom", "file://"+probe)
	if err != nil {
		return nil, err
	}
	m := resultRe.FindSubmatch(out)
	if m == nil {
		return nil, errors.New("pagecheck: the page's measurements are missing from the rendered DOM (did the script run?)")
	}
	var l Layout
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &l); err != nil {
		return nil, fmt.Errorf("pagecheck: measurements: %w", err)
	}
	return &l, nil
}

// Screenshot saves a PNG of page rendered width × height px to out.
func Screenshot(ctx context.Context, browser, page, out string, width, height int) error {
	dir, err := os.MkdirTemp("", "pagecheck-")
	if err != nil {
		return fmt.Errorf("pagecheck: %w", err)
	}
	defer os.RemoveAll(dir)
	abs, err := filepath.Abs(page)
	if err != nil {
		return fmt.Errorf("pagecheck: %w", err)
	}
	shot := filepath.Join(dir, "shot.png")
	if _, err := run(ctx, browser, dir, fmt.Sprintf("--window-size=%d,%d", width, height), "--hide-scrollbars", "--screenshot="+shot, "file://"+abs); err != nil {
		return err
	}
	b, err := os.ReadFile(shot)
	if err != nil {
		return fmt.Errorf("pagecheck: no screenshot: %w", err)
	}
	return os.WriteFile(out, b, 0o644)
}

// run runs the browser headless with a profile of its own in dir, so
// checks can run side by side, and returns its standard output.
func run(ctx context.Context, browser, dir string, args ...string) ([]byte, error) {
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile")}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tail := stderr.Bytes()
		if len(tail) > 400 {
			tail = tail[len(tail)-400:]
		}
		return nil, fmt.Errorf("pagecheck: %s: %w: %s", filepath.Base(browser), err, bytes.TrimSpace(tail))
	}
	return stdout.Bytes(), nil
}

// Err returns every problem of the layout for a window width px wide,
// joined: a horizontal scrollbar (scroll width above the width or the
// visible width), an element outside the page, an overlap; nil when none.
func (l *Layout) Err(width int) error {
	var errs []error
	if l.ScrollWidth > width || l.ScrollWidth > l.ClientWidth {
		errs = append(errs, fmt.Errorf("horizontal scrollbar: scroll width %d px, window %d px, visible %d px", l.ScrollWidth, width, l.ClientWidth))
	}
	for _, p := range l.Problems {
		errs = append(errs, errors.New(p))
	}
	return errors.Join(errs...)
}
