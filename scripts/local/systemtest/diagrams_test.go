package systemtest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// mermaidBlocks returns the Mermaid diagrams of a document (from the
// repository root) whose first line is kind ("stateDiagram-v2", "flowchart").
func mermaidBlocks(t *testing.T, doc, kind string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, doc))
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile("(?ms)^```mermaid\n(.*?)^```$").FindAllStringSubmatch(string(raw), -1) {
		if strings.HasPrefix(m[1], kind) {
			out = append(out, m[1])
		}
	}
	return out
}

// The pictures follow the code: the upload state diagram (README.md,
// docs/ARCHITECTURE.md, docs/RETAILERS.md, the same in each) has every state
// of catalog.States and no other; the flow (README.md and
// docs/ARCHITECTURE.md, the same in both) names every function that has a
// Lambda entry point.
func TestDiagramsFollowTheCode(t *testing.T) {
	t.Parallel()
	var states string
	for _, doc := range []string{"README.md", "docs/ARCHITECTURE.md", "docs/RETAILERS.md"} {
		blocks := mermaidBlocks(t, doc, "stateDiagram-v2")
		require.Len(t, blocks, 1, "%s: one upload state diagram", doc)
		if states == "" {
			states = blocks[0]
		}
		require.Equal(t, states, blocks[0], "%s shows another state diagram than README.md", doc)
	}
	transition := regexp.MustCompile(`^\s*(\S+)\s+-->\s+([^\s:]+)`)
	drawn := map[string]bool{}
	for _, line := range strings.Split(states, "\n")[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := transition.FindStringSubmatch(line)
		require.NotNil(t, m, "not a transition: %q", line)
		for _, s := range m[1:] {
			if s != "[*]" {
				drawn[s] = true
			}
		}
	}
	var want []string
	for _, s := range catalog.States {
		want = append(want, string(s))
	}
	slices.Sort(want)
	require.Equal(t, want, slices.Sorted(func(yield func(string) bool) {
		for s := range drawn {
			if !yield(s) {
				return
			}
		}
	}), "states in the diagram vs catalog.States")

	var flow string
	for _, doc := range []string{"README.md", "docs/ARCHITECTURE.md"} {
		blocks := mermaidBlocks(t, doc, "flowchart")
		require.Len(t, blocks, 1, "%s: one flow diagram", doc)
		if flow == "" {
			flow = blocks[0]
		}
		require.Equal(t, flow, blocks[0], "%s shows another flow diagram than README.md", doc)
	}
	mains, err := filepath.Glob(filepath.Join(repoRoot, "functions", "*", "lambda", "main.go"))
	require.NoError(t, err)
	require.NotEmpty(t, mains)
	for _, main := range mains {
		name := filepath.Base(filepath.Dir(filepath.Dir(main)))
		require.Regexp(t, `(?m)^\s+`+name+`\["`+name+` λ"\]`, flow, "the flow diagram has no node for the %s function", name)
	}
}
