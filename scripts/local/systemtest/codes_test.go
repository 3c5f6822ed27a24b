package systemtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/snapshot"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// codeSources are the directories whose code answers HTTP requests or
// decides an upload's fate: every error code a client can see is written
// there.
var codeSources = []string{"functions", "scripts/local/stack"}

// sourceCodes are the error codes the code can emit, found in the source.
type sourceCodes struct {
	// api: every error.code of an HTTP error answer ({"error": {"code"}}).
	api []string
	// status: every upload error code (status.error.code) written as a
	// literal or declared as a Code*/Hold* constant of the catalog and
	// snapshot packages.
	status []string
}

// findCodes reads the source: the code argument of every catalog.Errorf
// call, the Code of every httpapi.ErrorDetail and catalog.Error literal and
// every {"code":"..."} written out by hand are API codes; the Code of every
// snapshot.Error, Problem and Rejection literal, and every Code*/Hold*
// string constant of the catalog and snapshot packages, are upload codes.
// A code that is not a string literal or such a constant fails the test (the
// documents could not be checked against it), except where a code made
// elsewhere is passed on: a variable named code, or another value's Code
// (or code) field.
func findCodes(t *testing.T) sourceCodes {
	t.Helper()
	api, status := map[string]bool{}, map[string]bool{}
	handWritten := regexp.MustCompile(`"code":\s*"([a-z0-9_]+)"`)
	constName := regexp.MustCompile(`^(Code|Hold)[A-Z]`)
	for _, dir := range codeSources {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.Contains(filepath.ToSlash(path), "test/") { // storetest, metricstest...: test helpers
				return err
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			pkg := file.Name.Name
			code := func(into map[string]bool, e ast.Expr, what string) {
				switch e := e.(type) {
				case *ast.Ident:
					if e.Name == "code" || constName.MatchString(e.Name) {
						return // passed on, or a constant (found where declared)
					}
				case *ast.SelectorExpr:
					if e.Sel.Name == "Code" || e.Sel.Name == "code" || constName.MatchString(e.Sel.Name) {
						return
					}
				case *ast.BasicLit:
					if e.Kind == token.STRING {
						c, err := strconv.Unquote(e.Value)
						require.NoError(t, err)
						into[c] = true
						return
					}
				}
				t.Errorf("%s: the code of %s is neither a string literal nor a Code* constant; write it out so that docs/RETAILERS.md and docs/openapi.yaml can be checked against it",
					fset.Position(e.Pos()), what)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if name := qualified(n.Fun, pkg); name == "catalog.Errorf" && len(n.Args) >= 2 {
						code(api, n.Args[1], name)
					}
				case *ast.CompositeLit:
					var into map[string]bool
					switch typ := qualified(n.Type, pkg); typ {
					case "httpapi.ErrorDetail", "catalog.Error":
						into = api
					case "snapshot.Error", "snapshot.Problem", "catalog.Problem", "catalog.Rejection":
						into = status
					default:
						return true
					}
					for i, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Code" {
								code(into, kv.Value, qualified(n.Type, pkg))
							}
						} else if i == 0 {
							code(into, el, qualified(n.Type, pkg))
						}
					}
				case *ast.GenDecl:
					if n.Tok != token.CONST || (pkg != "catalog" && pkg != "snapshot") {
						return true
					}
					for _, spec := range n.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, name := range vs.Names {
							if constName.MatchString(name.Name) && i < len(vs.Values) {
								if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									c, _ := strconv.Unquote(lit.Value)
									status[c] = true
								}
							}
						}
					}
				case *ast.BasicLit:
					if n.Kind == token.STRING {
						for _, m := range handWritten.FindAllStringSubmatch(n.Value, -1) {
							api[m[1]] = true
						}
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	return sourceCodes{api: sortedKeys(api), status: sortedKeys(status)}
}

// qualified names a type or function as package.Name, the package being
// pkg when unqualified.
func qualified(e ast.Expr, pkg string) string {
	switch e := e.(type) {
	case *ast.Ident:
		return pkg + "." + e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
	case *ast.StarExpr:
		return qualified(e.X, pkg)
	}
	return ""
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// statusErrorCodes are the codes of an upload's error (status.error.code)
// as the code lists them: the reader's problems, the holds, and an upload
// that can no longer be read.
func statusErrorCodes() []string {
	codes := slices.Concat(snapshot.Codes, catalog.HoldCodes, catalog.UploadCodes)
	slices.Sort(codes)
	return slices.Compact(codes)
}

// The lists of upload codes (snapshot.Codes, catalog.HoldCodes,
// catalog.UploadCodes) hold every code the source declares or writes.
func TestUploadCodeListsAreComplete(t *testing.T) {
	t.Parallel()
	require.Equal(t, findCodes(t).status, statusErrorCodes(),
		"upload error codes in the source vs snapshot.Codes + catalog.HoldCodes + catalog.UploadCodes")
}

// docs/openapi.yaml enumerates exactly the codes the source can emit: the
// Error schema's error.code the API's, the Status schema's error.code the
// upload codes, and its problems' code those of a rejection (no holds).
func TestOpenAPIEnumeratesEveryErrorCode(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	require.NoError(t, err)
	enum := func(schema *openapi3.Schema, path ...string) []string {
		for _, p := range path {
			if p == "[]" {
				schema = schema.Items.Value
				continue
			}
			require.Contains(t, schema.Properties, p, "docs/openapi.yaml: %v", path)
			schema = schema.Properties[p].Value
		}
		var out []string
		for _, v := range schema.Enum {
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return out
	}
	codes := findCodes(t)
	schemas := doc.Components.Schemas
	require.Equal(t, codes.api, enum(schemas["Error"].Value, "error", "code"),
		"API error codes in the source vs the Error schema's error.code enum in docs/openapi.yaml")
	require.Equal(t, codes.status, enum(schemas["Status"].Value, "error", "code"),
		"upload error codes in the source vs the Status schema's error.code enum in docs/openapi.yaml")
	var rejections []string
	for _, c := range codes.status {
		if !slices.Contains(catalog.HoldCodes, c) {
			rejections = append(rejections, c)
		}
	}
	require.Equal(t, rejections, enum(schemas["Status"].Value, "error", "problems", "[]", "code"),
		"rejection codes vs the Status schema's error.problems[].code enum in docs/openapi.yaml")
}
