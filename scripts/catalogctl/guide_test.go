package main

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// guidePath is the retailer guide, from this package's directory.
const guidePath = "../../docs/RETAILERS.md"

// guide is docs/RETAILERS.md cut into sections at its headings.
type guide struct {
	text     string
	sections map[string]string // heading line (without #s) -> text up to the next heading
	codes    []string          // the codes with a section of their own (#### `code`), in order
}

var codeHeading = regexp.MustCompile("(?m)^#### `([a-z0-9_]+)`$")

func readGuide(t *testing.T) guide {
	t.Helper()
	raw, err := os.ReadFile(guidePath)
	require.NoError(t, err)
	g := guide{text: string(raw), sections: map[string]string{}}
	heading := regexp.MustCompile(`(?m)^#{2,4} (.+)$`)
	locs := heading.FindAllStringSubmatchIndex(g.text, -1)
	for i, loc := range locs {
		end := len(g.text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		g.sections[g.text[loc[2]:loc[3]]] = g.text[loc[1]:end]
	}
	for _, m := range codeHeading.FindAllStringSubmatch(g.text, -1) {
		g.codes = append(g.codes, m[1])
	}
	return g
}

// fenced returns the fenced code blocks of text with the given info string.
func fenced(text, info string) []string {
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(info) + "\n(.*?)^```$")
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// The guide explains every error code the source can emit: each upload
// problem, hold and upload code in a section of its own, each API code in
// the section on the API's errors; and it explains no code the source does
// not have.
func TestGuideExplainsEveryErrorCode(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	codes := systemtest.FindCodes(t, "../..")
	sorted := slices.Sorted(slices.Values(g.codes))
	require.Equal(t, codes.Status, sorted,
		"upload error codes in the source vs the #### `code` sections of docs/RETAILERS.md")
	require.Len(t, g.codes, len(sorted), "a code with two sections")
	api := g.sections["Errors of an API request"]
	require.NotEmpty(t, api, `docs/RETAILERS.md has no "### Errors of an API request" section`)
	for _, code := range codes.API {
		if !strings.Contains(api, "`"+code+"`") {
			t.Errorf("docs/RETAILERS.md, Errors of an API request, does not explain %s", code)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)` \\|").FindAllStringSubmatch(api, -1) {
		require.Contains(t, codes.API, m[1], "docs/RETAILERS.md explains %s, which the API does not answer", m[1])
	}
	for _, code := range catalog.HoldCodes {
		if !strings.Contains(g.sections["Holds and settings"], "`"+code+"`") {
			t.Errorf("docs/RETAILERS.md, Holds and settings, does not name %s", code)
		}
	}
}

// The guide's table of states has a row for every state of the code, final
// exactly when the state is.
func TestGuideExplainsEveryState(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	rows := map[string]string{} // state -> its "final?" cell
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| .* \\| ([^|]+) \\|$").FindAllStringSubmatch(g.sections["What happens to an upload"], -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	require.Len(t, rows, len(catalog.States), "rows of the table of states in docs/RETAILERS.md: %v", rows)
	for _, st := range catalog.States {
		final, ok := rows[string(st)]
		require.True(t, ok, "docs/RETAILERS.md, What happens to an upload: no row for %s", st)
		require.Equal(t, st.Terminal(), final == "yes", "docs/RETAILERS.md: %s, final? %q; the code: final %v", st, final, st.Terminal())
	}
}

// The guide's example files give the code of the section they are in, on
// the line and with the message the section shows; the problems without an
// example file (they need bytes or sizes a page cannot show) are made here
// as the section describes them. Every other example file is a good one.
func TestGuideExamplesGiveTheirCodes(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	read := func(data []byte, format snapshot.Format) checkReport {
		t.Helper()
		rep, err := checkSnapshot(context.Background(), bytes.NewReader(data), format)
		require.NoError(t, err)
		return rep
	}
	described := map[string][]byte{
		snapshot.CodeInvalidUTF8:        []byte("product_id,title\nSKU-1,Desk lamp\nSKU-2,Caf\xe9 table\n"),
		snapshot.CodeRowTooLarge:        []byte("product_id,title\nSKU-1,\"never closed\n" + strings.Repeat("SKU-2,x\n", 1<<18)),
		snapshot.CodeAttributesTooLarge: []byte("product_id,description\nSKU-1," + strings.Repeat("x", 300<<10) + "\n"),
		snapshot.CodeBadGzip:            fixtures.Gzip([]byte("product_id,title\nSKU-1,Desk lamp\n"))[:20],
	}
	withoutFile := []string{snapshot.CodeFileTooLarge, snapshot.CodeTooManyProducts} // limits of the server's, not of the file's form
	for _, code := range snapshot.Codes {
		section := g.sections["`"+code+"`"]
		require.NotEmpty(t, section, code)
		files := append(fenced(section, "csv"), fenced(section, "jsonl")...)
		if data, ok := described[code]; ok {
			require.Empty(t, files, "%s: the section has an example file: check it here instead", code)
			rep := read(data, "")
			require.NotEmpty(t, rep.Problems, code)
			require.Equal(t, code, rep.Problems[0].Code, "%s: %v", code, rep.Problems)
			continue
		}
		if slices.Contains(withoutFile, code) {
			require.Empty(t, files, code)
			continue
		}
		require.Len(t, files, 1, "%s: one example file (```csv or ```jsonl) in its section", code)
		format := snapshot.FormatCSV
		if len(fenced(section, "jsonl")) == 1 {
			format = snapshot.FormatJSONL
		}
		rep := read([]byte(files[0]), format)
		require.NotEmpty(t, rep.Problems, "%s: the example is a good file", code)
		first := rep.Problems[0]
		require.Equal(t, code, first.Code, "%s: the example gives %v", code, rep.Problems)
		shown := fenced(section, "text")
		require.NotEmpty(t, shown, "%s: the section shows the message in a ```text block", code)
		require.Equal(t, first.Message, strings.TrimSpace(shown[0]), "%s: the message the section shows", code)
	}
	// Outside the error sections, every example file is good.
	for _, code := range snapshot.Codes {
		g.text = strings.Replace(g.text, g.sections["`"+code+"`"], "", 1)
	}
	for _, info := range []string{"csv", "jsonl"} {
		for _, file := range fenced(g.text, info) {
			rep := read([]byte(file), snapshot.Format(info))
			require.Empty(t, rep.Problems, "an example file of docs/RETAILERS.md:\n%s", file)
			require.Positive(t, rep.Products)
		}
	}
}

// guideExamples are the example files of the guide's sections on file
// problems, each with the message its section shows.
type guideExample struct {
	code, message string
	format        snapshot.Format
	file          []byte
}

func guideExamples(t *testing.T, g guide) []guideExample {
	t.Helper()
	var out []guideExample
	for _, code := range snapshot.Codes {
		section := g.sections["`"+code+"`"]
		for _, format := range []snapshot.Format{snapshot.FormatCSV, snapshot.FormatJSONL} {
			for _, file := range fenced(section, string(format)) {
				shown := fenced(section, "text")
				require.NotEmpty(t, shown, "%s: the section shows the message in a ```text block", code)
				out = append(out, guideExample{code: code, message: strings.TrimSpace(shown[0]), format: format, file: []byte(file)})
			}
		}
	}
	return out
}

// guideHoldError is the "error" a hold's section of the guide shows.
func guideHoldError(t *testing.T, g guide, code string) message.StatusError {
	t.Helper()
	blocks := fenced(g.sections["`"+code+"`"], "json")
	require.Len(t, blocks, 1, "%s: one ```json block with the status's error", code)
	var e struct{ Error message.StatusError }
	require.NoError(t, json.Unmarshal([]byte("{"+blocks[0]+"}"), &e), "%s: %s", code, blocks[0])
	require.Equal(t, code, e.Error.Code)
	return e.Error
}

// The holds' sections show the messages the hold rules write, for the
// cases they describe.
func TestGuideHoldMessages(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	cases := map[string]catalog.HoldInput{
		catalog.HoldEmptySnapshot: {BaselineProducts: 1000},
		catalog.HoldMassDelete:    {BaselineProducts: 1000, NewProducts: 400, Deletes: 600},
		catalog.HoldAttributeDropped: {BaselineProducts: 1000, NewProducts: 1000, Updates: 1000,
			BaselineNames: []string{"color", "price"}, NewNames: []string{"price"},
			Drop: catalog.DropInput{Products: 1000, Baseline: catalog.AttributeCounts{"color": {Present: 1000, Valued: 1000}, "price": {Present: 1000, Valued: 1000}},
				Upload: catalog.AttributeCounts{"price": {Present: 1000, Valued: 1000}}}},
		catalog.HoldMassUpdate: {BaselineProducts: 1000, NewProducts: 1000, Updates: 1000,
			BaselineNames: []string{"price", "title"}, NewNames: []string{"price_eur", "title"}},
	}
	require.Len(t, cases, len(catalog.HoldCodes))
	for _, code := range catalog.HoldCodes {
		shown := guideHoldError(t, g, code)
		gotCode, message := catalog.DefaultHoldPolicy.HoldReason(cases[code])
		require.Equal(t, code, gotCode)
		require.Equal(t, message, shown.Message, code)
		require.Nil(t, shown.Line, code)
	}
}

// The guide's Go receiver is docs/samples/webhookreceiver/receiver.go, word
// for word (TestSamplesApplied has it verify real deliveries), and checks
// the headers the webhooks consumer sends, the signature in the form it
// writes.
func TestGuideWebhookSampleIsGo(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	samples := fenced(g.sections["Webhooks"], "go")
	require.Len(t, samples, 1)
	receiver, err := os.ReadFile("../../docs/samples/webhookreceiver/receiver.go")
	require.NoError(t, err)
	require.Equal(t, string(receiver), samples[0], "the guide's Go receiver vs docs/samples/webhookreceiver/receiver.go")
	file, err := parser.ParseFile(token.NewFileSet(), "receiver.go", samples[0], 0)
	require.NoError(t, err, "the Go sample of docs/RETAILERS.md, Webhooks")
	var funcs []string
	for _, d := range file.Decls {
		if f, ok := d.(*ast.FuncDecl); ok {
			funcs = append(funcs, f.Name.Name)
		}
	}
	require.Contains(t, funcs, "Verify")
	for _, s := range []string{webhook.HeaderSignature, webhook.HeaderEventID, `"` + webhook.SignaturePrefix + `"`} {
		require.Contains(t, samples[0], s)
	}
	sig := webhook.Sign([]byte("secret"), []byte(`{"id":"x"}`))
	require.Contains(t, g.sections["Webhooks"], "X-Catalog-Signature: sha256=<hex>")
	require.True(t, strings.HasPrefix(sig, "sha256="), sig)
}
