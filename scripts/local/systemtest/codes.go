package systemtest

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

	"github.com/stretchr/testify/require"
)

// codeSources are the directories (of the repository) whose code answers HTTP requests or
// decides an upload's fate: every error code a client can see is written
// there.
var codeSources = []string{"functions", "scripts/local/stack"}

// SourceCodes are the error codes the code can emit, found in the source.
type SourceCodes struct {
	// API: every error.code of an HTTP error answer ({"error": {"code"}}).
	API []string
	// Status: every upload error code (status.error.code) written as a
	// literal or declared as a Code*/Hold* constant of the catalog and
	// snapshot packages.
	Status []string
}

// FindCodes reads the source of the repository at root: the code argument of every catalog.Errorf
// call, the Code of every httpapi.ErrorDetail and catalog.Error literal and
// every {"code":"..."} written out by hand are API codes; the Code of every
// snapshot.Error, Problem and Rejection literal, and every Code*/Hold*
// string constant of the catalog and snapshot packages, are upload codes.
// A code that is not a string literal or such a constant fails the test (the
// documents could not be checked against it), except where a code made
// elsewhere is passed on: a variable named code, or another value's Code
// (or code) field.
func FindCodes(t *testing.T, root string) SourceCodes {
	t.Helper()
	api, status := map[string]bool{}, map[string]bool{}
	handWritten := regexp.MustCompile(`"code":\s*"([a-z0-9_]+)"`)
	constName := regexp.MustCompile(`^(Code|Hold)[A-Z]`)
	for _, dir := range codeSources {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.Contains(filepath.ToSlash(path), "test/") { // pgstoretest, metricstest...: test helpers
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
	return SourceCodes{API: sortedKeys(api), Status: sortedKeys(status)}
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
