package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// startStack starts a local stack on the shared PostgreSQL server and SQS
// emulator, and returns the tool's environment variables for it (API
// address and admin token).
func startStack(t *testing.T) (*stack.Stack, map[string]string) {
	t.Helper()
	st, err := stack.Start(context.Background(), stack.Options{
		PostgresURL: testenv.Postgres(t), SQSEndpoint: testenv.SQS(t), Prefix: testenv.Name("ctl"),
		DataDir: t.TempDir(), Addr: "127.0.0.1:0", Shards: 1, ChunkRows: 2000,
		HandlerTimeout: 5 * time.Second, VisibilityTimeout: 6 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st, map[string]string{apiVar: st.APIURL, adminTokenVar: st.AdminToken}
}

// onboard creates a retailer with the tool and returns vars with its token.
func onboard(t *testing.T, admin map[string]string, retailer string) map[string]string {
	t.Helper()
	r := runTool(t, admin, "onboard", retailer)
	require.Equal(t, 0, r.code, r.stderr)
	var out struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.NotEmpty(t, out.Token)
	return map[string]string{apiVar: admin[apiVar], tokenVar: out.Token}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// statusOf decodes the status JSON the tool printed on stdout.
func statusOf(t *testing.T, r result) apiclient.Status {
	t.Helper()
	var s apiclient.Status
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s), "stdout: %q\nstderr: %s", r.stdout, r.stderr)
	return s
}

var percentLine = regexp.MustCompile(`(?m)^uploading: +(\d+)% `)

func TestUploadExitCodesAgainstTheStack(t *testing.T) {
	t.Parallel()
	_, admin := startStack(t)

	t.Run("applied, rejected, held, confirmed", func(t *testing.T) {
		t.Parallel()
		vars := onboard(t, admin, "acme")
		base := fixtures.Generate("acme", 20000) // 2.7 MB: the meter passes every tenth
		data := base.CSV(nil)
		r := runTool(t, vars, "upload", "--retailer", "acme", writeFile(t, "catalog.csv", data))
		require.Equal(t, 0, r.code, r.stderr)
		st := statusOf(t, r)
		require.Equal(t, "applied", st.State)
		require.EqualValues(t, 20000, st.Changes.Inserted)
		require.Equal(t, st.Chunks.Total, st.Chunks.Applied)
		require.Equal(t, 10, st.Chunks.Total)
		// The progress meter moved: a line at every tenth or so, rising to 100%.
		var seen []int
		for _, m := range percentLine.FindAllStringSubmatch(r.stderr, -1) {
			pct, _ := strconv.Atoi(m[1])
			seen = append(seen, pct)
		}
		require.GreaterOrEqual(t, len(seen), 9, r.stderr)
		require.IsIncreasing(t, seen, r.stderr)
		require.Equal(t, 100, seen[len(seen)-1], r.stderr)
		require.Contains(t, r.stderr, "acme/1: generation 1 reserved")
		require.Contains(t, r.stderr, "acme/1: applied: 20000 inserted")

		// Rejected: exit 2, the reason and line in the status.
		bad := "product_id,title\nacme-1,ok\nacme-2,\"never closed\n"
		r = runTool(t, vars, "upload", "--retailer", "acme", writeFile(t, "bad.csv", []byte(bad)))
		require.Equal(t, 2, r.code, r.stderr)
		st = statusOf(t, r)
		require.Equal(t, "rejected", st.State)
		require.NotNil(t, st.Error)
		require.NotNil(t, st.Error.Line)
		require.Contains(t, r.stderr, "rejected, nothing of it applied: "+st.Error.Code)

		// Held: a snapshot deleting most of the catalog; exit 3, then confirm applies it.
		kept := fixtures.Catalog{}
		for _, id := range base.IDs()[:100] {
			kept[id] = base[id]
		}
		r = runTool(t, vars, "upload", writeFile(t, "few.jsonl", kept.JSONL()), "--retailer=acme")
		require.Equal(t, 3, r.code, r.stderr)
		st = statusOf(t, r)
		require.Equal(t, "held", st.State)
		require.Equal(t, "mass_delete", st.Error.Code)
		require.Contains(t, r.stderr, "catalogctl confirm acme 3")

		r = runTool(t, vars, "confirm", "acme", "3")
		require.Equal(t, 0, r.code, r.stderr)
		st = statusOf(t, r)
		require.Equal(t, "applied", st.State)
		require.EqualValues(t, 19900, st.Changes.Deleted)

		r = runTool(t, vars, "status", "acme")
		require.Equal(t, 0, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 4, r.stdout) // header + 3 uploads, newest first
		require.Regexp(t, `^3 +applied`, lines[1])
		require.Regexp(t, `^2 +rejected`, lines[2])
	})

	t.Run("gzip on the fly, a progress bar on a terminal, no-wait, superseded", func(t *testing.T) {
		t.Parallel()
		vars := onboard(t, admin, "globex")
		api := apiclient.New(admin[apiVar])
		// A slot reserved now and used after generation 2 arrived: it ends superseded.
		older, err := api.Reserve(context.Background(), vars[tokenVar], "globex", "")
		require.NoError(t, err)
		require.Equal(t, int64(1), older.Generation)

		path := writeFile(t, "catalog.jsonl", fixtures.Generate("globex", 5000).JSONL())
		var stdout, stderr strings.Builder
		env := Env{Getenv: func(k string) string { return vars[k] }, Stdout: &stdout, Stderr: &stderr, Terminal: true}
		code := run(context.Background(), []string{"upload", "--retailer", "globex", "--gzip", path}, env)
		require.Equal(t, 0, code, stderr.String())
		require.Contains(t, stderr.String(), "compressed ")
		require.Contains(t, stderr.String(), "\r", "a bar redraws in place on a terminal")
		require.Regexp(t, `uploading +100% `, stderr.String())
		var st apiclient.Status
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), &st))
		require.Equal(t, "applied", st.State)
		require.EqualValues(t, 5000, st.Changes.Inserted)

		// The older upload arrives last and ends superseded: status --wait exits 1.
		require.NoError(t, api.Put(context.Background(), older, fixtures.Generate("globex", 10).CSV(nil)))
		r := runTool(t, vars, "status", "globex", "1", "--wait", "--timeout", "1m")
		require.Equal(t, 1, r.code, r.stderr)
		require.Equal(t, "superseded", statusOf(t, r).State)
		require.Contains(t, r.stderr, "superseded by 2")

		// --no-wait: exit 0 once stored, the status as it is then.
		r = runTool(t, vars, "upload", "--retailer", "globex", "--no-wait", writeFile(t, "same.csv.gz", fixtures.Gzip(fixtures.Generate("globex", 5000).CSV(nil))))
		require.Equal(t, 0, r.code, r.stderr)
		require.Equal(t, int64(3), statusOf(t, r).Generation)
		require.Contains(t, r.stderr, "catalogctl status globex 3 --wait")
		r = runTool(t, vars, "status", "globex", "3", "--wait")
		require.Equal(t, 0, r.code, r.stderr)
		st = statusOf(t, r)
		require.Equal(t, "applied", st.State)
		require.EqualValues(t, 5000, st.Changes.Unchanged, "the same products as CSV change nothing")
	})
}
