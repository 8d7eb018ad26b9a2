package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

// The documentation a person navigates: README.md is the landing page and
// docs/ holds the rest, one page per task. These tests keep it navigable:
// the README stays short and links every page, each page says first what it
// answers, every relative link lands on a file (and a heading), and the
// commands marked runnable run as written.

// repoRoot is the repository's root from this package's directory.
const repoRoot = "../.."

// readmeMaxLines is the README's budget: a landing page, not the manual.
const readmeMaxLines = 400

// runnableMarker, on the line before a fenced block, says that every line
// of the block is a command that runs offline, fast and the same every
// time; TestDocsRunnableCommands runs them.
const runnableMarker = "<!-- runnable -->"

// docPage is one Markdown file, its path relative to repoRoot.
type docPage struct {
	path string
	text string
}

// docPages returns README.md and every docs/*.md.
func docPages(t *testing.T) []docPage {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("docs/: no *.md pages")
	}
	var out []docPage
	for _, p := range append([]string{filepath.Join(repoRoot, "README.md")}, paths...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		out = append(out, docPage{path: filepath.ToSlash(rel), text: string(b)})
	}
	return out
}

// prose is text with its fenced code blocks blanked out (lines kept, so
// line numbers still hold).
func prose(text string) []string {
	var out []string
	fence := ""
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if f := fenceOf(line); f != "" && (fence == "" || strings.HasPrefix(strings.TrimSpace(line), fence)) {
			if fence == "" {
				fence = f
			} else {
				fence = ""
			}
			out = append(out, "")
			continue
		}
		if fence != "" {
			out = append(out, "")
			continue
		}
		out = append(out, line)
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`[^`]*`")
	// mdLink is the target of a Markdown link or image: ](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// fenceOf returns the fence (``` or ~~~, as long as written) that line opens
// or closes, or "".
func fenceOf(line string) string {
	s := strings.TrimSpace(line)
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(s, c+c+c) {
			return s[:len(s)-len(strings.TrimLeft(s, c))]
		}
	}
	return ""
}

// links returns the relative link targets of a page, with their line (not
// those in code).
func links(p docPage) (out []struct {
	line   int
	target string
}) {
	for i, line := range prose(p.text) {
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			if u, err := url.Parse(m[1]); err == nil && u.Scheme != "" {
				continue // http(s), mailto: not checked here
			}
			out = append(out, struct {
				line   int
				target string
			}{i + 1, m[1]})
		}
	}
	return out
}

// anchors returns the anchors GitHub gives a page's headings: lower case,
// letters, digits, '-' and '_' kept, spaces to '-', everything else
// dropped; a repeated anchor gets -1, -2….
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range prose(text) {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimLeft(h, "#")
		if !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		for n := 1; out[a]; n++ {
			a = fmt.Sprintf("%s-%d", b.String(), n)
		}
		out[a] = true
	}
	return out
}

// The README is a landing page: under readmeMaxLines lines, and a reader
// reaches every page of docs/ from it.
func TestDocsReadmeIsALandingPage(t *testing.T) {
	pages := docPages(t)
	readme := pages[0]
	if n := strings.Count(readme.text, "\n"); n >= readmeMaxLines {
		t.Errorf("README.md: got %d lines, want under %d (move the detail to a page of docs/)", n, readmeMaxLines)
	}
	linked := map[string]bool{}
	for _, l := range links(readme) {
		target, _, _ := strings.Cut(l.target, "#")
		linked[path.Clean(target)] = true
	}
	for _, p := range pages[1:] {
		if !linked[p.path] {
			t.Errorf("README.md does not link %s: add it to the map of the docs", p.path)
		}
	}
}

// Each page of docs/ opens with its title, then what it answers.
func TestDocsPagesSayWhatTheyAnswer(t *testing.T) {
	for _, p := range docPages(t)[1:] {
		title, rest, _ := strings.Cut(p.text, "\n")
		rest = strings.TrimLeft(rest, "\n")
		if !strings.HasPrefix(title, "# ") || !strings.HasPrefix(rest, "This page answers: ") {
			first, _, _ := strings.Cut(rest, "\n")
			t.Errorf("%s: got title %q then %q, want \"# Title\" then \"This page answers: ...\"", p.path, title, first)
		}
	}
}

// Every relative link of README.md and docs/*.md lands on a file, and a
// link with #anchor on a heading of its page.
func TestDocsLinksResolve(t *testing.T) {
	pages := docPages(t)
	texts := map[string]string{}
	for _, p := range pages {
		texts[p.path] = p.text
	}
	n := 0
	for _, p := range pages {
		for _, l := range links(p) {
			n++
			target, anchor, hasAnchor := strings.Cut(l.target, "#")
			file := p.path
			if target != "" {
				file = path.Join(path.Dir(p.path), target)
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(file))); err != nil {
				t.Errorf("%s:%d: link %s: no file %s", p.path, l.line, l.target, file)
				continue
			}
			if !hasAnchor {
				continue
			}
			text, ok := texts[file]
			if !ok {
				b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(file)))
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", p.path, l.line, l.target, err)
					continue
				}
				text = string(b)
			}
			if !anchors(text)[anchor] {
				t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", p.path, l.line, l.target, file, anchor)
			}
		}
	}
	if n == 0 {
		t.Fatal("no relative links found: the link reader is broken")
	}
}

// runnable is one command of a block marked runnable.
type runnable struct {
	where string // page:line
	args  []string
}

// runnableCommands returns the commands of the blocks marked runnable, each
// line one command starting with "streamgate" (a trailing "# comment"
// dropped). A line a shell would read differently from its words (quotes,
// pipes, redirections, variables, continuations) is an error: these
// commands run in process, without a shell.
func runnableCommands(p docPage) ([]runnable, []error) {
	var (
		out  []runnable
		errs []error
	)
	lines := strings.Split(p.text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != runnableMarker {
			continue
		}
		if i+1 >= len(lines) || fenceOf(lines[i+1]) == "" {
			errs = append(errs, fmt.Errorf("%s:%d: %s is not followed by a fenced block", p.path, i+1, runnableMarker))
			continue
		}
		fence := fenceOf(lines[i+1])
		closed := false
		for j := i + 2; j < len(lines); j++ {
			line := strings.TrimSpace(lines[j])
			if strings.HasPrefix(line, fence) {
				closed, i = true, j
				break
			}
			if k := strings.Index(line, " #"); k >= 0 {
				line = strings.TrimSpace(line[:k])
			}
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			where := fmt.Sprintf("%s:%d", p.path, j+1)
			if strings.ContainsAny(line, "'\"`$|&;<>()\\*?") {
				errs = append(errs, fmt.Errorf("%s: %q: a runnable command must be plain words (it runs without a shell)", where, line))
				continue
			}
			words := strings.Fields(line)
			if words[0] != "streamgate" {
				errs = append(errs, fmt.Errorf("%s: %q: a runnable command starts with streamgate", where, line))
				continue
			}
			out = append(out, runnable{where: where, args: words[1:]})
		}
		if !closed {
			errs = append(errs, fmt.Errorf("%s:%d: the runnable block is not closed", p.path, i+2))
		}
	}
	return out, errs
}

// Every command in a block marked runnable runs as written: through the
// CLI's run, as main calls it, with an empty environment, exit status 0 and
// something on stdout. The README's quick start (serve, then a stream
// through it) is TestServeDefault's; the demo is internal/demo's tests.
func TestDocsRunnableCommands(t *testing.T) {
	var all []runnable
	inReadme := 0
	for _, p := range docPages(t) {
		cmds, errs := runnableCommands(p)
		for _, err := range errs {
			t.Error(err)
		}
		if p.path == "README.md" {
			inReadme = len(cmds)
		}
		all = append(all, cmds...)
	}
	if inReadme == 0 {
		t.Errorf("README.md: no command marked %s", runnableMarker)
	}
	for _, c := range all {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, slices.Clone(c.args), func(string) string { return "" }, &stdout, &stderr)
			if code != 0 || stdout.Len() == 0 {
				t.Errorf("%s: streamgate %s: got exit %d and %d bytes on stdout, want 0 and some output; stderr %q",
					c.where, strings.Join(c.args, " "), code, stdout.Len(), stderr.String())
			}
		})
	}
}
