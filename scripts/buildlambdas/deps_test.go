package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is the repository's module path.
const module = "github.com/retailcatalog/catalog"

// handlerOf names the handler an import path is (functions/<group>/<name>
// of handlerPackages), if it is one.
func handlerOf(importPath string) (string, bool) {
	rest, ok := strings.CutPrefix(importPath, module+"/functions/")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 2 || !slices.Contains(handlerGroups, parts[0]) || !slices.Contains(handlerPackages, parts[1]) {
		return "", false
	}
	return parts[1], true
}

// handlerGroups are the groups of functions/ that hold the Lambdas, by the
// flow; the others hold libraries, by kind.
var handlerGroups = []string{"ingest", "serve", "publish", "operate"}

// handlerPackages are the packages of function handlers
// (functions/<group>/<name> beside functions/<group>/<name>/lambda). A main links its own handler and those
// of handlerCalls, no other.
var handlerPackages = []string{"analytics", "apply", "arrival", "diff", "ops", "read", "relay", "upload", "webhooks"}

// handlerCalls are the handlers a function runs besides its own: apply and
// diff drain the outbox after they commit (relay.Handler in process).
var handlerCalls = map[string][]string{
	"apply": {"relay"},
	"diff":  {"relay"},
}

// linkRules say which functions may link a heavy or foreign dependency; a
// main whose name is not listed must not link any package under prefix.
var linkRules = []struct {
	name    string // what a violation is called
	prefix  string // import path prefix
	allowed []string
}{
	{"parquet-go", "github.com/parquet-go/", []string{"analytics"}},
	// the finance code (prices, cost model, HTML/SVG report): only the
	// upload function serves the cost routes.
	{"costs", module + "/functions/finance/costs", []string{"upload"}},
	// webhooksend calls retailers' endpoints: no database, no AWS service.
	{"pgx", "github.com/jackc/", databaseFunctions},
	{"aws-services", "github.com/aws/aws-sdk-go-v2/service/", databaseFunctions},
	// test and local-stack code never ships.
	{"testing", "testing", nil},
	{"testify", "github.com/stretchr/testify", nil},
	{"gofakes3", "github.com/johannesboyne/gofakes3", nil},
	{"scripts", module + "/scripts/", nil},
	{"cdk", "github.com/aws/aws-cdk-go/", nil},
}

// databaseFunctions may link pgx and the AWS SDK's service clients: every
// function with a database (all but webhooksend).
var databaseFunctions = []string{"analytics", "apply", "arrival", "diff", "migrate", "ops", "read", "relay", "upload", "webhooks"}

// knownExceptions are violations, by function, that are known and
// accepted for now (none today). The test fails both on a new violation
// and on an exception that no longer happens, so the table cannot go stale.
var knownExceptions = map[string][]string{}

// listed is one package of `go list`: its path, direct imports and every
// package it depends on.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList lists pkgs as buildlambdas builds them (linux/arm64, no cgo,
// -tags lambda.norpc), by import path.
func goList(t *testing.T, pkgs ...string) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-tags", "lambda.norpc", "-json=ImportPath,Imports,Deps"}, pkgs...)...)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	got := map[string]listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		got[p.ImportPath] = p
	}
	return got
}

// violations are what main (of function name) links against the rules.
func violations(name string, deps []string) []string {
	found := map[string]bool{}
	for _, d := range deps {
		if h, ok := handlerOf(d); ok && h != name && !slices.Contains(handlerCalls[name], h) {
			found["handler:"+h] = true
		}
		for _, r := range linkRules {
			if strings.HasPrefix(d, r.prefix) && !slices.Contains(r.allowed, name) {
				found[r.name] = true
			}
		}
	}
	var out []string
	for v := range found {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// TestLambdaDependencies pins what each Lambda main may link: its own
// handler (and those it runs, handlerCalls), parquet-go only in analytics,
// the finance code only in upload, pgx nowhere without a database, and
// never test or local-stack code; knownExceptions are today's exceptions.
func TestLambdaDependencies(t *testing.T) {
	t.Parallel()
	fns, err := Functions("../..")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, fn := range fns {
		pkgs = append(pkgs, fn.Package)
	}
	listedPkgs := goList(t, pkgs...)
	seen := map[string]bool{}
	for _, fn := range fns {
		p, ok := listedPkgs[path.Join(module, strings.TrimPrefix(fn.Package, "./"))]
		if !ok {
			t.Fatalf("go list did not list %s", fn.Package)
		}
		seen[fn.Name] = true
		got := violations(fn.Name, p.Deps)
		known := knownExceptions[fn.Name]
		for _, v := range got {
			if !slices.Contains(known, v) {
				t.Errorf("%s links %s, which it must not (see linkRules and handlerCalls)", fn.Name, v)
			}
		}
		for _, v := range known {
			if !slices.Contains(got, v) {
				t.Errorf("%s no longer links %s: remove it from knownExceptions", fn.Name, v)
			}
		}
	}
	for name := range knownExceptions {
		if !seen[name] {
			t.Errorf("knownExceptions names %s, which is no Lambda function", name)
		}
	}
}

// TestCoreDependencies pins the core: the domain package (functions/core/catalog)
// links only the standard library and imports no os, syscall or network
// package (no adapter, no parser, no finance code, no spill files); the
// contract suites link, of this module, only the interface they test; what
// counts usage links the usage counters, not the finance code (costs).
func TestCoreDependencies(t *testing.T) {
	t.Parallel()
	catalogPkg := module + "/functions/core/catalog"
	suites := map[string]string{
		module + "/functions/ports/blob/blobtest":   module + "/functions/ports/blob",
		module + "/functions/ports/queue/queuetest": module + "/functions/ports/queue",
		module + "/functions/ports/topic/topictest": module + "/functions/ports/topic",
	}
	var meters []string
	for _, p := range []string{"finance/metering", "stores/pgstore", "publish/relay", "adapters/s3blob", "adapters/sqsqueue", "adapters/snstopic"} {
		meters = append(meters, module+"/functions/"+p)
	}
	pkgs := append([]string{catalogPkg}, meters...)
	for s := range suites {
		pkgs = append(pkgs, s)
	}
	got := goList(t, pkgs...)

	cat, ok := got[catalogPkg]
	if !ok || len(cat.Imports) == 0 {
		t.Fatalf("go list gave no imports for %s", catalogPkg)
	}
	for _, d := range cat.Deps {
		if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
			t.Errorf("functions/core/catalog links %s: the domain core links only the standard library", d)
		}
	}
	for _, imp := range cat.Imports {
		if imp == "os" || imp == "syscall" || imp == "os/exec" || imp == "database/sql" ||
			imp == "net" || strings.HasPrefix(imp, "net/") {
			t.Errorf("functions/core/catalog imports %s", imp)
		}
	}
	for suite, iface := range suites {
		for _, d := range got[suite].Deps {
			if strings.HasPrefix(d, module+"/") && d != iface {
				t.Errorf("%s links %s: a contract suite links only the interface it tests (%s)", suite, d, iface)
			}
		}
	}
	for _, m := range meters {
		if slices.Contains(got[m].Deps, module+"/functions/finance/costs") {
			t.Errorf("%s links functions/finance/costs: usage counters are package usage", m)
		}
	}
}

// importRules are the layout's rules (docs/ARCHITECTURE.md, "Code shape"):
// what a package of each kind may import of this module. A handler
// (functions/<group>/<name> of a flow group) may import the libraries, not
// an adapter, a store, the wiring or another handler; its <name>wiring and
// lambda/ packages build it from everything. Each rule is a prefix of the
// importer and the prefixes it may import.
var importRules = []struct {
	kind     string
	importer func(rel string) bool
	may      []string
}{
	{"the domain core", prefixed("functions/core/"), []string{"functions/core/"}},
	{"the messages", prefixed("events/"), []string{"functions/core/", "events/"}},
	{"a boundary", prefixed("functions/ports/"), []string{"functions/core/", "functions/ports/", "events/"}},
	{"finance", prefixed("functions/finance/"), []string{"functions/core/", "functions/finance/", "functions/ports/"}},
	{"an adapter", prefixed("functions/adapters/"), []string{"functions/core/", "functions/ports/", "functions/adapters/", "functions/finance/usage", "functions/finance/metering", "events/",
		"functions/publish/webhook"}}, // lambdainvoke carries webhook.Delivery
	{"the store", prefixed("functions/stores/"), []string{"functions/core/", "functions/ports/", "functions/stores/", "functions/finance/", "events/", "sql",
		"scripts/local/testenv"}}, // pgstoretest, which only tests import
	{"the wiring", func(rel string) bool { return rel == "functions/platform/connect" }, []string{"functions/", "events/", "sql"}},
	{"the platform", prefixed("functions/platform/"), []string{"functions/core/", "functions/ports/", "functions/platform/", "functions/finance/", "events/",
		"functions/publish/webhook"}},
	{"a handler", isHandlerSide, []string{"functions/core/", "functions/ports/", "functions/finance/", "events/",
		"functions/platform/config", "functions/platform/httpapi", "functions/platform/logging", "functions/platform/metrics", "functions/platform/retry",
		"functions/publish/webhook"}},
}

func prefixed(p string) func(string) bool {
	return func(rel string) bool { return strings.HasPrefix(rel, p) }
}

// isHandlerSide reports whether rel is a flow group's package other than a
// function's lambda/ or <name>wiring/ or a test fixture (<name>test: what
// only tests import, such as serve/servetest): the handler, or a library of
// it, such as publish/webhook or ingest/diff/extsort.
func isHandlerSide(rel string) bool {
	parts := strings.Split(rel, "/")
	if len(parts) < 3 || parts[0] != "functions" || !slices.Contains(handlerGroups, parts[1]) {
		return false
	}
	last := parts[len(parts)-1]
	return last != "lambda" && !strings.HasSuffix(last, "wiring") && !strings.HasSuffix(last, "test")
}

// TestLayoutImportRules checks what each package of functions/ and events/
// imports (its own code, not its tests) against importRules; a handler
// may import its own subpackages, and no handler another's.
func TestLayoutImportRules(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "./functions/...", "./events/...")
	if len(pkgs) < 40 {
		t.Fatalf("go list listed %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		for _, r := range importRules {
			if !r.importer(rel) {
				continue
			}
			for _, imp := range p.Imports {
				dep, ok := strings.CutPrefix(imp, module+"/")
				if !ok || dep == rel || strings.HasPrefix(dep, rel+"/") {
					continue
				}
				allowed := slices.ContainsFunc(r.may, func(p string) bool { return dep == strings.TrimSuffix(p, "/") || strings.HasPrefix(dep, p) })
				if isHandlerSide(rel) && isHandlerSide(dep) && dep != "functions/publish/webhook" {
					allowed = false
				}
				if !allowed {
					t.Errorf("%s (%s) imports %s, which the layout does not allow (importRules)", rel, r.kind, dep)
				}
			}
			break
		}
	}
}
