// Command buildlambdas builds every Lambda function of the repository for
// the provided.al2023 runtime on arm64, without Docker:
//
//	go run ./scripts/buildlambdas -out dist/lambda
//
// Each functions/<group>/<name>/lambda directory (a Go package main), and each
// infra/<name>/lambda (the deploy-time custom resources, such as the schema
// migrations), is compiled with
// GOOS=linux GOARCH=arm64 CGO_ENABLED=0 -tags lambda.norpc -trimpath
// -ldflags "-s -w" into <out>/<name>/bootstrap and zipped into
// <out>/<name>.zip with bootstrap at the root, executable, and the files of
// ZipFiles beside it (the RDS CA bundle the functions verify database
// servers against, at certs/rds-ca-bundle.pem). The zip is
// deterministic (fixed timestamps), so an unchanged function keeps its CDK
// asset hash and is not redeployed. Progress and sizes go to stderr, so the
// command can run in front of the CDK app.
package main

import (
	"archive/zip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/adapters/rdsca"
)

// Options configures Build.
type Options struct {
	// Root is the module root holding functions/ (default ".").
	Root string
	// Out is the output directory (default dist/lambda).
	Out string
	// Only, when not empty, restricts the build to these function names.
	Only []string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Result describes one built function.
type Result struct {
	// Name is the function name (the directory under functions/).
	Name string
	// Bootstrap is the path of the executable.
	Bootstrap string
	// Zip is the path of the deployment package.
	Zip string
	// BinaryBytes and ZipBytes are the sizes of the two.
	BinaryBytes, ZipBytes int64
}

// ZipFiles are written into every zip beside bootstrap, by path in the zip.
var ZipFiles = map[string][]byte{
	rdsca.ZipPath: rdsca.Bundle,
}

// zipTime is the modification time of every zip entry (the zip epoch).
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	var opts Options
	var only string
	flag.StringVar(&opts.Out, "out", "dist/lambda", "output directory for <name>/bootstrap and <name>.zip")
	flag.StringVar(&opts.Root, "root", ".", "module root containing functions/")
	flag.StringVar(&only, "only", "", "comma-separated function names to build (default: all)")
	flag.Parse()
	if only != "" {
		opts.Only = strings.Split(only, ",")
	}
	opts.Log = os.Stderr
	if _, err := Build(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "buildlambdas:", err)
		os.Exit(1)
	}
}

// SourceGlobs match the lambda/ directories of the packages built: the
// functions, grouped by the flow (functions/ingest/diff/lambda), and the
// deploy-time custom resources (infra/migrate/lambda).
var SourceGlobs = []string{filepath.Join("functions", "*", "*", "lambda"), filepath.Join("infra", "*", "lambda")}

// Function is one Lambda package to build.
type Function struct {
	// Name is the directory above lambda/, and the name of the zip.
	Name string
	// Package is the import path relative to the module root
	// ("./functions/<group>/<name>/lambda").
	Package string
}

// Functions lists the <name>/lambda packages under root (every match of
// SourceGlobs) that hold Go files, sorted by name. Two packages with
// the same name are an error: their zips would collide.
func Functions(root string) ([]Function, error) {
	var fns []Function
	seen := map[string]string{}
	for _, glob := range SourceGlobs {
		dirs, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			goFiles, _ := filepath.Glob(filepath.Join(dir, "*.go"))
			if len(goFiles) == 0 {
				continue
			}
			rel, err := filepath.Rel(root, dir)
			if err != nil {
				return nil, err
			}
			name := filepath.Base(filepath.Dir(dir))
			pkg := "./" + filepath.ToSlash(rel)
			if prev, ok := seen[name]; ok {
				return nil, fmt.Errorf("two functions named %s: %s and %s", name, prev, pkg)
			}
			seen[name] = pkg
			fns = append(fns, Function{Name: name, Package: pkg})
		}
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].Name < fns[j].Name })
	return fns, nil
}

// Build compiles and zips every function (or opts.Only) and returns what it
// built. It fails when there is nothing to build.
func Build(ctx context.Context, opts Options) ([]Result, error) {
	if opts.Root == "" {
		opts.Root = "."
	}
	if opts.Out == "" {
		opts.Out = filepath.Join("dist", "lambda")
	}
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	fns, err := Functions(opts.Root)
	if err != nil {
		return nil, err
	}
	if len(opts.Only) > 0 {
		byName := map[string]Function{}
		for _, f := range fns {
			byName[f.Name] = f
		}
		fns = fns[:0:0]
		for _, n := range opts.Only {
			f, ok := byName[strings.TrimSpace(n)]
			if !ok {
				return nil, fmt.Errorf("no Go package at functions/*/%s/lambda or infra/%s/lambda", n, n)
			}
			fns = append(fns, f)
		}
	}
	if len(fns) == 0 {
		return nil, fmt.Errorf("no functions/*/*/lambda packages under %s", opts.Root)
	}
	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, fn := range fns {
		start := time.Now()
		res, err := buildOne(ctx, opts.Root, out, fn)
		if err != nil {
			return results, fmt.Errorf("%s: %w", fn.Name, err)
		}
		fmt.Fprintf(logw, "built %-12s bootstrap %8s  zip %8s  %s  (%s)\n", fn.Name,
			humanBytes(res.BinaryBytes), humanBytes(res.ZipBytes), res.Zip, time.Since(start).Round(time.Millisecond))
		results = append(results, res)
	}
	return results, nil
}

func buildOne(ctx context.Context, root, out string, fn Function) (Result, error) {
	name := fn.Name
	dir := filepath.Join(out, name)
	if err := os.RemoveAll(dir); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	bin := filepath.Join(dir, "bootstrap")
	cmd := exec.CommandContext(ctx, "go", "build",
		"-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w",
		"-o", bin, fn.Package)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("go build: %w", err)
	}
	zipPath := filepath.Join(out, name+".zip")
	if err := zipBootstrap(bin, zipPath); err != nil {
		return Result{}, err
	}
	res := Result{Name: name, Bootstrap: bin, Zip: zipPath}
	for _, f := range []struct {
		path string
		size *int64
	}{{bin, &res.BinaryBytes}, {zipPath, &res.ZipBytes}} {
		st, err := os.Stat(f.path)
		if err != nil {
			return Result{}, err
		}
		*f.size = st.Size()
	}
	return res, nil
}

// zipBootstrap writes a zip holding bin as an executable "bootstrap" entry
// and the files of ZipFiles (in path order, read-only), atomically (a temp
// file renamed into place).
func zipBootstrap(bin, zipPath string) (err error) {
	src, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(zipPath), ".bootstrap-*.zip")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	zw := zip.NewWriter(tmp)
	hdr := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: zipTime}
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return err
	}
	if _, err = io.Copy(w, src); err != nil {
		return err
	}
	paths := make([]string, 0, len(ZipFiles))
	for p := range ZipFiles {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		hdr := &zip.FileHeader{Name: p, Method: zip.Deflate, Modified: zipTime}
		hdr.SetMode(0o444)
		if w, err = zw.CreateHeader(hdr); err != nil {
			return err
		}
		if _, err = w.Write(ZipFiles[p]); err != nil {
			return err
		}
	}
	if err = zw.Close(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), zipPath)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
