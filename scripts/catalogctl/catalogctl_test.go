package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// result is one run of the tool.
type result struct {
	code           int
	stdout, stderr string
}

// runTool runs the tool in process with the given environment variables
// (nothing else of the process's environment).
func runTool(t *testing.T, vars map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := Env{Getenv: func(k string) string { return vars[k] }, Stdout: &stdout, Stderr: &stderr}
	code := run(context.Background(), args, env)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

func commandNames() []string {
	var names []string
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"--api", "http://x", "-h"}} {
		r := runTool(t, nil, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stdout, "usage: catalogctl")
		for _, name := range commandNames() {
			require.Contains(t, r.stdout, "  "+name+" ", "the tool's usage lists %s", name)
		}
	}
	for _, name := range commandNames() {
		// -h needs no token and no API, and wins over missing arguments.
		for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {"help", name}, {name, "x", "-h"}} {
			r := runTool(t, nil, args...)
			require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
			require.Contains(t, r.stdout, "usage: catalogctl "+name, "%v", args)
			require.Empty(t, r.stderr, "%v", args)
		}
	}
}

func TestBadUsage(t *testing.T) {
	t.Parallel()
	r := runTool(t, nil)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "commands:")

	r = runTool(t, nil, "frobnicate")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `unknown command "frobnicate"`)

	r = runTool(t, nil, "status", "--no-such-flag")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "flag provided but not defined")
	require.Contains(t, r.stderr, "catalogctl status -h")

	vars := map[string]string{tokenVar: "t"}
	r = runTool(t, vars, "status", "r1", "1", "2")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "usage: catalogctl status [flags] R [G]")

	r = runTool(t, vars, "status", "r1", "minus-one")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `generation "minus-one" must be a positive integer`)

	r = runTool(t, vars, "--api", "ftp://x", "status", "r1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, `"ftp://x" is not a URL`)
}

func TestMissingTokenIsExplained(t *testing.T) {
	t.Parallel()
	r := runTool(t, nil, "status", "r1", "1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no token")
	require.Contains(t, r.stderr, tokenVar)

	r = runTool(t, nil, "onboard", "r1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no admin token")
	require.Contains(t, r.stderr, adminTokenVar)

	// A retailer's token does not stand in for the admin token.
	r = runTool(t, map[string]string{tokenVar: "rt"}, "onboard", "r1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, adminTokenVar)
}

func TestUnreachableAPIIsExplained(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	r := runTool(t, map[string]string{tokenVar: "t", apiVar: addr}, "status", "r1", "1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "cannot reach the catalog API at http://"+addr)
	require.Contains(t, r.stderr, "go run ./scripts/local up")
	require.Contains(t, r.stderr, "--api")
}

// fakeAPI answers the status routes as the API would, for one retailer token.
func fakeAPI(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(w http.ResponseWriter, r *http.Request) bool {
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			return true
		case "Bearer other":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":"forbidden","message":"this token belongs to another retailer"}}`))
		default:
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"invalid_token","message":"the token is not valid"}}`))
		}
		return false
	}
	mux.HandleFunc("GET /v1/retailers/r1/snapshots/7", func(w http.ResponseWriter, r *http.Request) {
		if auth(w, r) {
			w.Write([]byte(`{"retailer_id":"r1","generation":7,"state":"applied","future_field":1,"chunks":{"total":2,"applied":2}}`))
		}
	})
	mux.HandleFunc("GET /v1/retailers/r1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		if auth(w, r) {
			require.Equal(t, "5", r.URL.Query().Get("limit"))
			if r.URL.Query().Get("before") == "7" {
				w.Write([]byte(`{"items":[{"retailer_id":"r1","generation":6,"state":"applied"}],"next_before":null}`))
				return
			}
			require.False(t, r.URL.Query().Has("before"))
			w.Write([]byte(`{"items":[{"retailer_id":"r1","generation":8,"state":"rejected","error":{"code":"duplicate_product_id","message":"p1 also on line 2","line":5}},
				{"retailer_id":"r1","generation":7,"state":"superseded","superseded_by":8}],"next_before":7}`))
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestStatus(t *testing.T) {
	t.Parallel()
	srv := fakeAPI(t)
	vars := map[string]string{apiVar: srv.URL + "/", tokenVar: "good"}

	r := runTool(t, vars, "status", "r1", "7")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"retailer_id":"r1","generation":7,"state":"applied","future_field":1,"chunks":{"total":2,"applied":2}}`, r.stdout)

	// Flags after the arguments, --api and --token after the command.
	r = runTool(t, nil, "status", "r1", "--limit", "5", "--api", srv.URL, "--token", "good")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], "GENERATION")
	require.Contains(t, lines[1], "rejected")
	require.Contains(t, lines[1], "duplicate_product_id at line 5")
	require.Contains(t, lines[2], "superseded by 8")
	require.Contains(t, r.stderr, "older uploads: catalogctl status r1 --before 7")

	r = runTool(t, vars, "status", "r1", "--limit=5", "--before", "7")
	require.Equal(t, 0, r.code, r.stderr)
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	require.Regexp(t, `^6 +applied`, lines[1])
	require.NotContains(t, r.stderr, "older uploads", "the last page")

	r = runTool(t, vars, "status", "--json", "--limit=5", "r1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"items": [`)

	// The admin token stands in for a retailer's.
	r = runTool(t, map[string]string{apiVar: srv.URL, adminTokenVar: "good"}, "status", "r1", "7")
	require.Equal(t, 0, r.code, r.stderr)

	r = runTool(t, map[string]string{apiVar: srv.URL, tokenVar: "stale"}, "status", "r1", "7")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "refused the token from $"+tokenVar)
	require.Contains(t, r.stderr, "invalid_token")

	r = runTool(t, map[string]string{apiVar: srv.URL}, "--token", "other", "status", "r1", "7")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "the token from --token is not this retailer's")
	require.Empty(t, r.stdout)
}

// fakeUploads is an API and an S3 in one server: reservations hand out a
// presigned-like URL on the same server; s3 decides each PUT's fate.
func fakeUploads(t *testing.T, s3 func(w http.ResponseWriter, r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	var srv *httptest.Server
	mux.HandleFunc("POST /v1/retailers/r1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"retailer_id":"r1","generation":4,"upload":{"method":"PUT","url":%q,"headers":{"If-None-Match":"*","x-amz-meta-origin":"catalogctl"},"expires_at":"2030-01-01T00:00:00Z"}}`,
			srv.URL+"/bucket/snapshots/r1/4/upload?X-Amz-Signature=abc")
	})
	mux.HandleFunc("GET /v1/retailers/r1/snapshots/4", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"retailer_id":"r1","generation":4,"state":"received"}`))
	})
	mux.HandleFunc("PUT /bucket/snapshots/r1/4/upload", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s3(w, r, body)
	})
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestUploadPutsTheFileAsTold(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("p1,a\n"), 1000)
	var got struct {
		body           []byte
		length         int64
		transfer       []string
		ifNoneMatch    string
		meta, auth, ct string
	}
	srv := fakeUploads(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		got.body, got.length, got.transfer = body, r.ContentLength, r.TransferEncoding
		got.ifNoneMatch, got.meta = r.Header.Get("If-None-Match"), r.Header.Get("X-Amz-Meta-Origin")
		got.auth, got.ct = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
	})
	vars := map[string]string{apiVar: srv.URL, tokenVar: "rt"}
	r := runTool(t, vars, "upload", "--no-wait", "--retailer", "r1", writeFile(t, "c.csv", data))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, data, got.body)
	require.Equal(t, int64(len(data)), got.length)
	require.Empty(t, got.transfer, "a known length, never chunked")
	require.Equal(t, "*", got.ifNoneMatch)
	require.Equal(t, "catalogctl", got.meta)
	require.Empty(t, got.auth, "the API token never goes to S3")
	require.Empty(t, got.ct, "no header beyond the signed ones")
	require.JSONEq(t, `{"retailer_id":"r1","generation":4,"state":"received"}`, r.stdout)

	// An empty file is sent with Content-Length: 0 (S3 refuses chunked PUTs).
	r = runTool(t, vars, "upload", "--no-wait", "--retailer", "r1", writeFile(t, "empty.csv", nil))
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, got.body)
	require.Equal(t, int64(0), got.length)
	require.Empty(t, got.transfer)
}

func TestUploadRetriesAPutThatBrokeOff(t *testing.T) {
	t.Parallel()
	var tries int
	srv := fakeUploads(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		tries++
		switch tries {
		case 1: // the connection drops before an answer
			conn, _, err := w.(http.Hijacker).Hijack()
			require.NoError(t, err)
			conn.Close()
		default: // the first try had stored the object after all
			w.WriteHeader(http.StatusPreconditionFailed)
			w.Write([]byte(`<?xml version="1.0"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`))
		}
	})
	vars := map[string]string{apiVar: srv.URL, tokenVar: "rt"}
	r := runTool(t, vars, "upload", "--no-wait", "--retailer", "r1", writeFile(t, "c.csv", []byte("product_id\np1\n")))
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 2, tries)
	require.Contains(t, r.stderr, "upload try 1 of 3 failed")
	require.Contains(t, r.stderr, "an earlier try stored the file")
}

func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	status := http.StatusPreconditionFailed
	srv := fakeUploads(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `<Error><Code>%s</Code><Message>no</Message></Error>`, strings.ReplaceAll(http.StatusText(status), " ", ""))
	})
	vars := map[string]string{apiVar: srv.URL, tokenVar: "rt"}
	file := writeFile(t, "c.csv", []byte("product_id\np1\n"))
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusPreconditionFailed, "the upload URL was used already"},
		{http.StatusForbidden, "the upload URL was refused (HTTP 403 Forbidden: no); it was valid until"},
		{http.StatusRequestEntityTooLarge, "the file (14 B) is over the upload size limit"},
	} {
		status = tc.status
		r := runTool(t, vars, "upload", "--retailer", "r1", file)
		require.Equal(t, 1, r.code, r.stderr)
		require.Contains(t, r.stderr, "catalogctl upload: r1/4: "+tc.want)
		require.Empty(t, r.stdout)
	}

	// Checked before anything is reserved.
	for args, want := range map[string]string{
		"--retailer r1":                       "want one FILE",
		"" + file:                             "--retailer is required",
		"--retailer bad/id " + file:           "is not a retailer id",
		"--retailer r1 --format xml " + file:  `--format must be "csv" or "jsonl"`,
		"--retailer r1 /no/such/file.csv":     "no such file or directory",
		"--retailer r1 " + filepath.Dir(file): "is not a regular file",
	} {
		r := runTool(t, vars, append([]string{"upload"}, strings.Fields(args)...)...)
		require.Equal(t, 1, r.code, args)
		require.Contains(t, r.stderr, want, args)
	}
}

func TestFormatFromName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"a.csv": "csv", "A.CSV.GZ": "csv", "x/y.jsonl": "jsonl", "y.ndjson.gz": "jsonl", "z.txt": "", "noext": "",
	} {
		require.Equal(t, want, formatFromName(name), name)
	}
}
