package main

import (
	"archive/zip"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// testStackName is the stack name used by every synthesized test stack.
//
// It is as long as MaxStackNameLength allows, so that TestEnvironmentSize
// measures the longest names.
const testStackName = "CatalogTest-with-a-long-name-32c"

// TestMain makes `go test ./infra/...` work on a fresh machine: jsii and
// the CDK write their caches and the cloud assembly under temp dirs, and
// the jsii node process is stopped at the end.
func TestMain(m *testing.M) {
	if os.Getenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT") == "" {
		os.Setenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT", filepath.Join(os.TempDir(), "catalog-infra-jsii-cache"))
	}
	os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	os.Setenv("JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION", "1")
	os.Setenv("JSII_DEPRECATED", "quiet")
	tmp, err := os.MkdirTemp("", "catalog-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testTmp = tmp
	os.Setenv("CDK_OUTDIR", filepath.Join(tmp, "cdk.out"))
	code := m.Run()
	jsii.Close()
	os.RemoveAll(tmp)
	os.Exit(code)
}

var testTmp string

// synthResult is one synthesized stack, shared by the tests that read it.
type synthResult struct {
	params   Params
	template assertions.Template
	// json is the template as plain Go values.
	json map[string]any
	// messages are the cloud assembly messages of the stack (cdk-nag).
	messages []annotation
	// nag is the cdk-nag AwsSolutions report.
	nag     []nagRow
	outdir  string
	stack   awscdk.Stack
	elapsed time.Duration
}

// templateOf synthesizes the app of stack; a failed synthesis (the CDK
// panics through jsii) becomes an error.
func templateOf(stack awscdk.Stack) (tmpl assertions.Template, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return assertions.Template_FromStack(stack, nil), nil
}

// annotation is one annotation of the cloud assembly.
type annotation struct {
	level, path, text string
}

var (
	synthMu    sync.Mutex
	synthCache = map[string]*synthResult{}
)

// placeholderAssets writes one zip with a dummy bootstrap per code asset, so
// the stack synthesizes without building the functions.
func placeholderAssets(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testTmp, "assets")
	for _, name := range CodeAssets {
		path := filepath.Join(dir, name+".zip")
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		zw := zip.NewWriter(f)
		hdr := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
		hdr.SetMode(0o755)
		w, _ := zw.CreateHeader(hdr)
		fmt.Fprintf(w, "#!/bin/sh\necho placeholder %s\n", name)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return dir
}

// cdkJSONContext returns the "context" of the repository's cdk.json: the
// parameter defaults and the feature flags `cdk deploy` uses.
func cdkJSONContext(t *testing.T) map[string]any {
	t.Helper()
	ctx, err := readCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ctx) == 0 {
		t.Fatal("../cdk.json has no context")
	}
	return ctx
}

// synth synthesizes the app the way `cdk synth` would (cdk.json context,
// BuildApp, cdk-nag applied), with overrides on top of the cdk.json context
// and placeholder code assets, once per distinct overrides.
func synth(t *testing.T, overrides map[string]any) *synthResult {
	t.Helper()
	key := fmt.Sprint(overrides) // fmt sorts map keys
	synthMu.Lock()
	defer synthMu.Unlock()
	if r, ok := synthCache[key]; ok {
		return r
	}
	start := time.Now()
	ctx := cdkJSONContext(t)
	ctx[CtxStackName] = testStackName
	ctx[CtxLambdaAssetDir] = placeholderAssets(t)
	for k, v := range overrides {
		ctx[k] = v
	}
	outdir, err := os.MkdirTemp(testTmp, "cdk.out-")
	if err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir), Context: &ctx})
	stack, params, err := BuildApp(app)
	if err != nil {
		t.Fatalf("BuildApp(%s): %v", key, err)
	}
	tmpl, err := templateOf(stack)
	if err != nil {
		t.Fatalf("synthesis failed: %v\n%s", err, validationFailures(outdir))
	}
	r := &synthResult{params: params, template: tmpl, json: *tmpl.ToJSON(), outdir: outdir, stack: stack}
	// Template_FromStack synthesized the app into outdir, with the
	// annotations the aspects (cdk-nag) recorded and the cdk-nag report.
	r.messages = readMessages(t, outdir, *stack.ArtifactId())
	r.nag = readNagReport(t, outdir, *stack.ArtifactId())
	r.elapsed = time.Since(start)
	t.Logf("synthesized %s in %s (%d resources, %d messages)", key, r.elapsed.Round(time.Millisecond), len(r.resources("")), len(r.messages))
	synthCache[key] = r
	return r
}

// resources returns the template resources of a type ("" for all), by
// logical id.
func (r *synthResult) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, v := range r.json["Resources"].(map[string]any) {
		res := v.(map[string]any)
		if typ == "" || res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// readMessages returns the error, warning and info annotations of one stack
// from the cloud assembly in outdir (inline in manifest.json, or in the
// artifact's <id>.metadata.json).
func readMessages(t *testing.T, outdir, artifactID string) []annotation {
	t.Helper()
	type entry struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	var manifest struct {
		Artifacts map[string]struct {
			Metadata map[string][]entry `json:"metadata"`
		} `json:"artifacts"`
	}
	readJSON(t, filepath.Join(outdir, "manifest.json"), &manifest)
	metadata := manifest.Artifacts[artifactID].Metadata
	if path := filepath.Join(outdir, artifactID+".metadata.json"); len(metadata) == 0 && fileExists(path) {
		readJSON(t, path, &metadata)
	}
	var out []annotation
	for path, entries := range metadata {
		for _, e := range entries {
			level := strings.TrimPrefix(e.Type, "aws:cdk:")
			if level != "error" && level != "warning" && level != "info" {
				continue
			}
			text, ok := e.Data.(string)
			if !ok {
				text = fmt.Sprint(e.Data)
			}
			out = append(out, annotation{level: level, path: path, text: text})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].path != out[j].path {
			return out[i].path < out[j].path
		}
		return out[i].text < out[j].text
	})
	return out
}

// nagRow is one line of the cdk-nag report (AwsSolutions-<stack>-NagReport.csv).
type nagRow struct {
	rule, resource, compliance, reason, level string
}

func readNagReport(t *testing.T, outdir, artifactID string) []nagRow {
	t.Helper()
	// cdk-nag names the report after the stack's path (AwsSolutions--<id>-...).
	paths, _ := filepath.Glob(filepath.Join(outdir, "AwsSolutions-*"+artifactID+"-NagReport.csv"))
	if len(paths) != 1 {
		t.Fatalf("want one cdk-nag report for %s in %s, got %v", artifactID, outdir, paths)
	}
	f, err := os.Open(paths[0])
	if err != nil {
		t.Fatalf("cdk-nag report: %v", err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []nagRow
	for _, rec := range records[1:] {
		rows = append(rows, nagRow{rule: rec[0], resource: rec[1], compliance: rec[2], reason: rec[3], level: rec[4]})
	}
	return rows
}

// validationFailures lists the violations of a failed synthesis from
// validation-report.json (the CDK fails synthesis on error annotations).
func validationFailures(outdir string) string {
	var report struct {
		PluginReports []struct {
			Violations []struct {
				Description         string `json:"description"`
				Severity            string `json:"severity"`
				ViolatingConstructs []struct {
					ConstructPath string `json:"constructPath"`
				} `json:"violatingConstructs"`
			} `json:"violations"`
		} `json:"pluginReports"`
	}
	raw, err := os.ReadFile(filepath.Join(outdir, "validation-report.json"))
	if err != nil || json.Unmarshal(raw, &report) != nil {
		return "(no validation report)"
	}
	var b strings.Builder
	for _, p := range report.PluginReports {
		for _, v := range p.Violations {
			if v.Severity != "error" {
				continue
			}
			desc, _, _ := strings.Cut(v.Description, "\n")
			fmt.Fprintf(&b, "%s\n", desc)
			for _, c := range v.ViolatingConstructs {
				fmt.Fprintf(&b, "    at %s\n", c.ConstructPath)
			}
		}
	}
	return b.String()
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
