package systemtest_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
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

// stateNames are catalog.States as strings, sorted.
func stateNames() []string {
	var out []string
	for _, s := range catalog.States {
		out = append(out, string(s))
	}
	slices.Sort(out)
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
	edges := map[[2]string]bool{} // from, to
	for _, line := range strings.Split(states, "\n")[1:] {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m := transition.FindStringSubmatch(line)
		require.NotNil(t, m, "not a transition: %q", line)
		edges[[2]string{m[1], m[2]}] = true
		for _, s := range m[1:] {
			if s != "[*]" {
				drawn[s] = true
			}
		}
	}
	require.Equal(t, stateNames(), slices.Sorted(maps.Keys(drawn)), "states in the diagram vs catalog.States")

	// The transitions are those of the store's SQL, both ways.
	moves := stateMoves(t)
	require.NotEmpty(t, moves)
	for move, query := range moves {
		require.True(t, edges[move], "%s moves a generation from %s to %s: the state diagram has no such arrow", query, move[0], move[1])
	}
	for edge := range edges {
		if edge[0] != "[*]" && edge[1] != "[*]" {
			require.Contains(t, moves, edge, "the state diagram's arrow %s --> %s: no query of functions/stores/pgstore/queries*.sql makes that move", edge[0], edge[1])
		}
	}
	for _, s := range catalog.States {
		if s.Terminal() {
			require.True(t, edges[[2]string{string(s), "[*]"}], "%s is final: the diagram ends it with --> [*]", s)
		}
	}

	var flow string
	for _, doc := range []string{"README.md", "docs/ARCHITECTURE.md"} {
		blocks := mermaidBlocks(t, doc, "flowchart")
		require.Len(t, blocks, 1, "%s: one flow diagram", doc)
		if flow == "" {
			flow = blocks[0]
		}
		require.Equal(t, flow, blocks[0], "%s shows another flow diagram than README.md", doc)
	}
	mains, err := filepath.Glob(filepath.Join(repoRoot, "functions", "*", "*", "lambda", "main.go"))
	require.NoError(t, err)
	require.NotEmpty(t, mains)
	for _, main := range mains {
		name := filepath.Base(filepath.Dir(filepath.Dir(main)))
		require.Regexp(t, `(?m)^\s+`+name+`\["`+name+` λ"\]`, flow, "the flow diagram has no node for the %s function", name)
	}
}

// stateMoves reads the generation state changes of the store's SQL
// (every functions/stores/pgstore/queries*.sql file): for each "UPDATE generations SET state =
// ..." statement, every state its SET can write, from every state its WHERE
// allows ("state = 'x'", "state IN (...)", "state NOT IN (...)"). The answer
// maps each move (from, to) to a query that makes it.
func stateMoves(t *testing.T) map[[2]string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "functions", "stores", "pgstore", "queries*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		all = append(append(all, b...), '\n')
	}
	raw := all
	known := map[string]bool{}
	for _, s := range catalog.States {
		known[string(s)] = true
	}
	literals := func(text string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(text, -1) {
			if known[m[1]] {
				out = append(out, m[1])
			}
		}
		return out
	}
	name := regexp.MustCompile(`(?m)^-- name: (\S+)$`)
	update := regexp.MustCompile(`(?s)UPDATE generations\s+SET\s+state\s*=(.*?)\sWHERE\s(.*?);`)
	from := regexp.MustCompile(`\bstate\s*(=\s*'[a-z_]+'|NOT IN\s*\([^)]*\)|IN\s*\([^)]*\))`)
	moves := map[[2]string]string{}
	text := string(raw)
	locs := name.FindAllStringSubmatchIndex(text, -1)
	for i, loc := range locs {
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		query := text[loc[2]:loc[3]]
		for _, u := range update.FindAllStringSubmatch(text[loc[1]:end], -1) {
			to := literals(u[1])
			require.NotEmpty(t, to, "%s: a state change to no state the code knows", query)
			conds := from.FindAllStringSubmatch(u[2], -1)
			require.Len(t, conds, 1, "%s: the WHERE should name the states it moves from once", query)
			var sources []string
			switch cond := conds[0][1]; {
			case strings.HasPrefix(cond, "NOT IN"):
				excluded := literals(cond)
				for _, s := range catalog.States {
					if !slices.Contains(excluded, string(s)) {
						sources = append(sources, string(s))
					}
				}
			default:
				sources = literals(cond)
			}
			require.NotEmpty(t, sources, query)
			for _, f := range sources {
				for _, to := range to {
					if f != to {
						moves[[2]string{f, to}] = query
					}
				}
			}
		}
	}
	return moves
}

// README's "How it is built" names every folder of functions/ and scripts/
// (a new developer finds each there).
func TestReadmeLayoutNamesEveryFolder(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	var layout string
	for _, m := range regexp.MustCompile("(?ms)^```\n(functions/.*?)^```$").FindAllStringSubmatch(string(raw), -1) {
		layout = m[1]
	}
	require.NotEmpty(t, layout, "README.md: no code block starting with functions/")
	groups, err := os.ReadDir(filepath.Join(repoRoot, "functions"))
	require.NoError(t, err)
	parents := []string{"functions", "scripts"}
	for _, g := range groups {
		if g.IsDir() {
			parents = append(parents, filepath.Join("functions", g.Name()))
		}
	}
	for _, parent := range parents {
		entries, err := os.ReadDir(filepath.Join(repoRoot, parent))
		require.NoError(t, err)
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			named := regexp.MustCompile(`(^|[\s/])` + regexp.QuoteMeta(e.Name()) + `(/|\s)`)
			require.Regexp(t, named, layout, "README.md's layout does not name %s/%s", parent, e.Name())
		}
	}
}
