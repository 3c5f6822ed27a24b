package systemtest_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// designDoc is the design every "DESIGN N" citation refers to, from the
// repository root.
const designDoc = "docs/DESIGN.md"

// outsidePointers are the ways a file could point at a design document kept
// outside the repository. They are built from pieces so that this file does
// not hold them itself.
var outsidePointers = []string{"../" + "shared", "/work/" + "shared", "shared" + "/DESIGN"}

// designCitation is a citation of a section of the design: the word DESIGN,
// a space and the section's number, or a subsection's ("N.M").
var designCitation = regexp.MustCompile(`\bDESIGN (\d+)(?:\.(\d+))?`)

// repositoryFiles lists the files of the repository (tracked, and new ones
// not ignored), relative to its root: git's list when git can give it, else
// a walk of the tree that leaves out what .gitignore names. Binary files are
// left out.
func repositoryFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, filepath.FromSlash(f))
			}
		}
	} else {
		t.Logf("git ls-files: %v; walking the tree instead", err)
		files = walkRepository(t)
	}
	var text []string
	for _, f := range files {
		info, err := os.Stat(filepath.Join(repoRoot, f))
		if errors.Is(err, fs.ErrNotExist) || err == nil && !info.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		require.NoError(t, err)
		raw, err := os.ReadFile(filepath.Join(repoRoot, f))
		require.NoError(t, err)
		if bytes.IndexByte(raw[:min(len(raw), 8000)], 0) >= 0 {
			continue // binary, as git decides it
		}
		text = append(text, f)
	}
	self := filepath.FromSlash("scripts/local/systemtest/docs_test.go")
	require.True(t, slices.Contains(text, self), "the %d repository files listed do not include %s", len(text), self)
	return text
}

// walkRepository lists the files under the repository root less those
// .gitignore leaves out: its "/name" and "name/" entries by path, its
// others by file name (the only forms the repository's .gitignore uses).
func walkRepository(t *testing.T) []string {
	t.Helper()
	ignoredPaths := map[string]bool{".git": true}
	var ignoredNames []string
	if raw, err := os.ReadFile(filepath.Join(repoRoot, ".gitignore")); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case line == "" || strings.HasPrefix(line, "#"):
			case strings.HasPrefix(line, "/"):
				ignoredPaths[strings.Trim(line, "/")] = true
			default:
				ignoredNames = append(ignoredNames, strings.TrimSuffix(line, "/"))
			}
		}
	}
	var files []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		if err != nil || rel == "." {
			return err
		}
		ignored := ignoredPaths[filepath.ToSlash(rel)] || slices.ContainsFunc(ignoredNames, func(p string) bool {
			ok, _ := filepath.Match(p, d.Name())
			return ok
		})
		switch {
		case ignored && d.IsDir():
			return filepath.SkipDir
		case ignored || d.IsDir() || !d.Type().IsRegular():
			return nil
		}
		files = append(files, rel)
		return nil
	})
	require.NoError(t, err)
	return files
}

// eachLine calls f with every line of a repository file and its number.
func eachLine(t *testing.T, file string, f func(n int, line string)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, file))
	require.NoError(t, err)
	for i, line := range strings.Split(string(raw), "\n") {
		f(i+1, line)
	}
}

// The repository stands alone: no file of it points at a design document
// kept outside it (docs/DESIGN.md is the design).
func TestDocsPointInsideTheRepository(t *testing.T) {
	t.Parallel()
	for _, file := range repositoryFiles(t) {
		eachLine(t, file, func(n int, line string) {
			for _, p := range outsidePointers {
				if strings.Contains(line, p) {
					t.Errorf("%s:%d names %q, outside the repository: point to %s instead", file, n, p, designDoc)
				}
			}
		})
	}
}

// designSections reads the sections of docs/DESIGN.md: its "## N." headings
// and its "### N.M" ones.
func designSections(t *testing.T) (sections []int, subsections map[string]bool) {
	t.Helper()
	subsections = map[string]bool{}
	heading := regexp.MustCompile(`^## (\d+)\. \S`)
	subheading := regexp.MustCompile(`^### (\d+\.\d+)[. ]`)
	eachLine(t, designDoc, func(_ int, line string) {
		if m := heading.FindStringSubmatch(line); m != nil {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			sections = append(sections, n)
		}
		if m := subheading.FindStringSubmatch(line); m != nil {
			subsections[m[1]] = true
		}
	})
	return sections, subsections
}

// Every citation "DESIGN N" (or "DESIGN N.M") in any file of the repository
// names a section docs/DESIGN.md has; and the design keeps the numbers the
// citations were written against: sections 1 to 14 in order, invariants I1
// to I12.
func TestDocsCiteExistingDesignSections(t *testing.T) {
	t.Parallel()
	sections, subsections := designSections(t)
	want := make([]int, 14)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, sections, "%s: its \"## N.\" sections, in order", designDoc)
	raw, err := os.ReadFile(filepath.Join(repoRoot, designDoc))
	require.NoError(t, err)
	for i := 1; i <= 12; i++ {
		require.Regexp(t, `(?m)^- \*\*I`+strconv.Itoa(i)+` [A-Z]`, string(raw), "%s defines invariant I%d", designDoc, i)
	}

	citations := 0
	for _, file := range repositoryFiles(t) {
		eachLine(t, file, func(n int, line string) {
			for _, m := range designCitation.FindAllStringSubmatch(line, -1) {
				citations++
				section, err := strconv.Atoi(m[1])
				switch {
				case err != nil || !slices.Contains(sections, section):
					t.Errorf("%s:%d cites %q: %s has no section %s", file, n, m[0], designDoc, m[1])
				case m[2] != "" && !subsections[m[1]+"."+m[2]]:
					t.Errorf("%s:%d cites %q: %s has no subsection %s.%s", file, n, m[0], designDoc, m[1], m[2])
				}
			}
		})
	}
	require.Greater(t, citations, 100, "citations of the design found in the repository")
}

// citedTest is a test named in a document: a Test or Fuzz function's name
// in backquotes.
var citedTest = regexp.MustCompile("`((?:Test|Fuzz)[A-Z][A-Za-z0-9_]*)`")

// testFunc is the declaration of a test, fuzz test or benchmark.
var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)

// Every test a document names (docs/*.md and README.md, in backquotes)
// exists: the docs say how each property is proven, and a renamed or
// deleted test must not leave them pointing at nothing.
func TestDocsNameExistingTests(t *testing.T) {
	t.Parallel()
	declared := map[string]bool{}
	var docs []string
	for _, file := range repositoryFiles(t) {
		switch {
		case strings.HasSuffix(file, "_test.go"):
			raw, err := os.ReadFile(filepath.Join(repoRoot, file))
			require.NoError(t, err)
			for _, m := range testFunc.FindAllSubmatch(raw, -1) {
				declared[string(m[1])] = true
			}
		case file == "README.md" || (strings.HasPrefix(file, "docs/") && strings.HasSuffix(file, ".md")):
			docs = append(docs, file)
		}
	}
	cited := 0
	for _, file := range docs {
		eachLine(t, file, func(n int, line string) {
			for _, m := range citedTest.FindAllStringSubmatch(line, -1) {
				cited++
				if !declared[m[1]] {
					t.Errorf("%s:%d names test %s, which no _test.go declares", file, n, m[1])
				}
			}
		})
	}
	require.Greater(t, cited, 50, "tests named in the docs")
}
