package pgstore

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
)

// queryFiles holds every queries*.sql file: queries.sql (the pipeline's),
// queries_ops.sql (the ops function's: why, the sweeper, reconciliation)
// and one file per later feature, each "-- name: x" block one query.
//
//go:embed queries*.sql
var queryFiles embed.FS

// queries maps each "-- name: x" block of the queries*.sql files to its SQL;
// a name defined twice is a programming error.
var queries = loadQueries()

func loadQueries() map[string]string {
	files, err := fs.Glob(queryFiles, "queries*.sql")
	if err != nil {
		panic(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := queryFiles.ReadFile(f)
		if err != nil {
			panic(err)
		}
		for name, sql := range parseQueries(string(b)) {
			if _, dup := out[name]; dup {
				panic(fmt.Sprintf("pgstore: query %q defined twice (again in %s)", name, f))
			}
			out[name] = sql
		}
	}
	return out
}

func parseQueries(file string) map[string]string {
	out := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSpace(body.String())
		}
		body.Reset()
	}
	for _, line := range strings.Split(file, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name = strings.TrimSpace(rest)
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	flush()
	return out
}

// q returns the named query; a missing name is a programming error caught by tests.
func q(name string) string {
	s, ok := queries[name]
	if !ok {
		panic(fmt.Sprintf("pgstore: no query %q in the queries*.sql files", name))
	}
	return s
}
