package main

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The catalogctl command lines of README.md and docs/*.md are ones the tool
// takes: each line of a code block, run against an API that answers every
// request with an error, fails at the API (or at a file the reader would
// have), never at its command, flags or arguments; each `catalogctl ...`
// in the text names a command and flags the tool has.
func TestDocumentedCommandLines(t *testing.T) {
	t.Parallel()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"route_not_found","message":"documentation test"}}`))
	}))
	t.Cleanup(api.Close)
	vars := map[string]string{apiVar: api.URL, tokenVar: "rt_doc", adminTokenVar: "adm_doc"}

	docs, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	docs = append(docs, "../../README.md")
	line := regexp.MustCompile(`(?m)^(?:[A-Z_]+=\S+ )*(?:\./catalogctl|go run \./scripts/catalogctl) ([^#\n]*)`)
	inline := regexp.MustCompile("`catalogctl ([^`]*)`")
	lines, spans := 0, 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(raw)
		for _, block := range fenced(text, "sh") {
			for _, m := range line.FindAllStringSubmatch(block, -1) {
				args := strings.Fields(strings.Split(m[1], ">")[0]) // no redirection
				if placeholder(args) {
					continue
				}
				lines++
				if len(args) > 0 && args[0] == "model" {
					continue // runs on its own, no API: TestModelPrintsTheScaleAnswers
				}
				r := runTool(t, vars, args...)
				require.NotContains(t, r.stderr, "run 'catalogctl", "%s: catalogctl %s", doc, m[1])
				if !strings.Contains(strings.Join(args, " "), "-h") {
					require.NotEqual(t, 0, r.code, "%s: catalogctl %s: passed against an API that fails", doc, m[1])
				}
			}
		}
		for _, m := range inline.FindAllStringSubmatch(text, -1) {
			args := strings.Fields(m[1])
			if args[0] == "<command>" || args[0] == "..." {
				continue
			}
			spans++
			cmd := commands[args[0]]
			require.NotNil(t, cmd, "%s: `catalogctl %s`: no such command", doc, m[1])
			fs := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
			cmd.Flags(fs)
			new(globals).declare(fs)
			for _, a := range args[1:] {
				if name, ok := strings.CutPrefix(a, "--"); ok {
					name, _, _ = strings.Cut(name, "=")
					require.NotNil(t, fs.Lookup(name), "%s: `catalogctl %s`: %s has no flag --%s", doc, m[1], cmd.Name, name)
				}
			}
		}
	}
	require.Greater(t, lines, 20, "command lines found in the docs")
	require.Greater(t, spans, 20, "`catalogctl ...` found in the docs")
}

// placeholder reports whether a documented command line stands for others
// ("catalogctl <command> -h").
func placeholder(args []string) bool {
	for _, a := range args {
		if strings.ContainsAny(a, "<>[]|") {
			return true
		}
	}
	return false
}
