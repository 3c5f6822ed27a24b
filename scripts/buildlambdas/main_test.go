package main

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/functions/adapters/rdsca"
)

// checkZip asserts that zipPath holds an executable "bootstrap" entry that
// is a static linux/arm64 ELF executable, and beside it exactly the RDS CA
// bundle at certs/rds-ca-bundle.pem, byte for byte, not executable.
func checkZip(t *testing.T, zipPath string) {
	t.Helper()
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatalf("open %s: %v", zipPath, err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if strings.Join(names, " ") != "bootstrap certs/rds-ca-bundle.pem" {
		t.Fatalf("%s: want exactly [bootstrap certs/rds-ca-bundle.pem], got %v", zipPath, names)
	}
	if ca := zr.File[1]; ca.Mode().Perm()&0o111 != 0 || ca.Mode().Perm()&0o444 != 0o444 {
		t.Errorf("%s: %s has mode %v, want readable, not executable", zipPath, ca.Name, ca.Mode())
	} else if body := readZipFile(t, ca); !bytes.Equal(body, rdsca.Bundle) {
		t.Errorf("%s: %s differs from functions/adapters/rdsca/rds-ca-bundle.pem", zipPath, ca.Name)
	}
	f := zr.File[0]
	if f.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s: bootstrap is not executable (mode %v)", zipPath, f.Mode())
	}
	data := readZipFile(t, f)
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: bootstrap is not ELF: %v", zipPath, err)
	}
	if ef.Machine != elf.EM_AARCH64 || ef.Class != elf.ELFCLASS64 || ef.Type != elf.ET_EXEC {
		t.Errorf("%s: want a 64-bit arm64 executable, got %v %v %v", zipPath, ef.Class, ef.Machine, ef.Type)
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: bootstrap is dynamically linked (CGO_ENABLED=0 expected)", zipPath)
		}
	}
}

func readZipFile(t *testing.T, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeModule creates a throwaway module with two functions and a
// functions/ directory without a lambda package.
func writeModule(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":                               "module example.com/throwaway\n\ngo 1.22\n",
		"functions/greet/hello/lambda/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
		"functions/greet/other/lambda/main.go": "package main\n\nfunc main() {}\n",
		"functions/core/shared/shared.go":      "package shared\n",
		"infra/setup/lambda/main.go":           "package main\n\nfunc main() {}\n",
	}
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestBuildThrowawayModule(t *testing.T) {
	root := writeModule(t)
	out := filepath.Join(t.TempDir(), "dist")
	var log bytes.Buffer
	results, err := Build(context.Background(), Options{Root: root, Out: out, Log: &log})
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, log.String())
	}
	if len(results) != 3 || results[0].Name != "hello" || results[1].Name != "other" || results[2].Name != "setup" {
		t.Fatalf("want hello, other and setup, got %+v", results)
	}
	for _, r := range results {
		checkZip(t, r.Zip)
		if r.Zip != filepath.Join(out, r.Name+".zip") || r.Bootstrap != filepath.Join(out, r.Name, "bootstrap") {
			t.Errorf("unexpected paths %+v", r)
		}
		if r.BinaryBytes == 0 || r.ZipBytes == 0 || r.ZipBytes >= r.BinaryBytes {
			t.Errorf("implausible sizes %+v", r)
		}
		if !strings.Contains(log.String(), "built "+r.Name) {
			t.Errorf("no progress line for %s in %q", r.Name, log.String())
		}
	}

	// Deterministic: a rebuild gives the same zip bytes (same asset hash).
	first, _ := os.ReadFile(results[0].Zip)
	if _, err := Build(context.Background(), Options{Root: root, Out: out, Only: []string{"hello"}}); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(results[0].Zip)
	if !bytes.Equal(first, second) {
		t.Error("rebuilding the same source changed the zip")
	}
}

func TestBuildErrors(t *testing.T) {
	root := writeModule(t)
	if _, err := Build(context.Background(), Options{Root: root, Out: t.TempDir(), Only: []string{"missing"}}); err == nil {
		t.Error("want an error for an unknown function")
	}
	if _, err := Build(context.Background(), Options{Root: t.TempDir(), Out: t.TempDir()}); err == nil {
		t.Error("want an error when there is nothing to build")
	}
	broken := writeModule(t)
	if err := os.WriteFile(filepath.Join(broken, "functions/greet/hello/lambda/main.go"), []byte("package main\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), Options{Root: broken, Out: t.TempDir()}); err == nil {
		t.Error("want an error when a function does not compile")
	}
	dup := writeModule(t)
	if err := os.MkdirAll(filepath.Join(dup, "infra/hello/lambda"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dup, "infra/hello/lambda/main.go"), []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Functions(dup); err == nil || !strings.Contains(err.Error(), "two functions named hello") {
		t.Errorf("want a name collision error, got %v", err)
	}
}

// TestBuildRepositoryFunctions builds the real functions of this repository,
// one zip per functions/*/*/lambda package.
func TestBuildRepositoryFunctions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every function of the repository")
	}
	root := filepath.Join("..", "..")
	names, err := Functions(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Skip("no functions/*/*/lambda packages in the repository yet")
	}
	// The functions the CDK app deploys must be among them.
	have := map[string]bool{}
	for _, f := range names {
		have[f.Name] = true
	}
	for _, want := range []string{"upload", "read", "diff", "apply", "migrate"} {
		if !have[want] {
			t.Errorf("no Lambda package for %s (the CDK app deploys it)", want)
		}
	}
	out := t.TempDir()
	results, err := Build(context.Background(), Options{Root: root, Out: out, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(names) {
		t.Fatalf("built %d functions, want %d (%v)", len(results), len(names), names)
	}
	for _, r := range results {
		checkZip(t, r.Zip)
	}
	zips, _ := filepath.Glob(filepath.Join(out, "*.zip"))
	if len(zips) != len(names) {
		t.Errorf("want one zip per function, got %v", zips)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
