package pgstore

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed queries.sql
var queriesFile string

// opsQueriesFile holds the queries of the ops function (why, the sweeper,
// reconciliation), kept apart from the pipeline's.
//
//go:embed queries_ops.sql
var opsQueriesFile string

// queries maps each "-- name: x" block of queries.sql and queries_ops.sql to its SQL.
var queries = parseQueries(queriesFile + "\n" + opsQueriesFile)

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
		panic(fmt.Sprintf("pgstore: no query %q in queries.sql", name))
	}
	return s
}
