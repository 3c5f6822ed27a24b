package systemtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// delta reserves a delta upload of format (csv or jsonl), uploads data and
// waits until it settles.
func (e *env) delta(retailer, format string, data []byte) apiclient.Status {
	e.T.Helper()
	ctx := systemtest.Context(e.T, 2*time.Minute)
	slot, err := e.API.ReserveMode(ctx, e.Token(retailer), retailer, format, "delta")
	require.NoError(e.T, err)
	require.NoError(e.T, e.API.Put(ctx, slot, data))
	return e.Wait(retailer, slot.Generation)
}

// A delta's _delete that is neither a delete nor a keep ("True", "true ",
// 1, the string "true" in JSON Lines) rejects the delta (unsupported_value,
// on its line) and changes nothing: read as a keep, a CSV row meant to
// delete a product blanked its attributes instead, and a JSON Lines one
// updated it.
func TestDeltaOddDeleteRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("acme")
	c := fixtures.Catalog{"A": fixtures.Row("alpha"), "B": fixtures.Row("beta")}
	require.Equal(t, "applied", e.Upload("acme", c.CSV(nil)).State)
	for _, d := range []struct {
		format, file string
		line         int
	}{
		{"csv", "product_id,title,_delete\nB,beta2,\nA,,True\n", 3},
		{"csv", "product_id,title,_delete\nA,,true \n", 2},
		{"csv", "product_id,title,_delete\nA,,1\n", 2},
		{"jsonl", `{"product_id":"A","title":"x","_delete":"true"}` + "\n", 1},
		{"jsonl", `{"product_id":"B","title":"y"}` + "\n" + `{"product_id":"A","_delete":1}` + "\n", 2},
	} {
		st := e.delta("acme", d.format, []byte(d.file))
		require.Equal(t, "rejected", st.State, d.file)
		require.NotNil(t, st.Error, d.file)
		require.Equal(t, "unsupported_value", st.Error.Code, d.file)
		require.Contains(t, st.Error.Message, "_delete", d.file)
		require.NotNil(t, st.Error.Line, d.file)
		require.Equal(t, d.line, *st.Error.Line, d.file)
		e.RequireCatalog("acme", c)
	}
	// The forms the guide gives still delete and keep.
	st := e.delta("acme", "csv", []byte("product_id,title,_delete\nA,,true\nB,beta2,false\n"))
	require.Equal(t, "applied", st.State)
	want := fixtures.Catalog{"B": c["B"]}
	want["B"] = map[string]string{}
	for k, v := range c["B"] {
		want["B"][k] = v
	}
	want["B"]["title"] = "beta2"
	e.RequireCatalog("acme", want)
}

// A rejected delta's problems file lists every problem, as a full
// snapshot's does (up to 100,000, DESIGN 13), not only the status's first
// 100: rows the reader refuses, duplicate ids and odd _delete values, in
// line order, without a truncation mark.
func TestDeltaProblemsFileListsEveryProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("acme")
	require.Equal(t, "applied", e.Upload("acme", fixtures.Catalog{"A": fixtures.Row("alpha")}.CSV(nil)).State)
	var b strings.Builder
	b.WriteString("product_id,title,_delete\n")
	var want []int // the lines with a problem
	line := 1
	for i := 0; i < 60; i++ {
		b.WriteString(fmt.Sprintf("d%03d,x,\nd%03d,y,\n", i, i)) // a duplicate on the second
		b.WriteString(fmt.Sprintf("m%03d,x\n", i))               // malformed: 2 columns
		b.WriteString(fmt.Sprintf("t%03d,,TRUE\n", i))           // odd _delete
		want = append(want, line+2, line+3, line+4)
		line += 4
	}
	st := e.delta("acme", "csv", []byte(b.String()))
	require.Equal(t, "rejected", st.State)
	require.Len(t, st.Error.Problems, 100)
	require.True(t, st.Error.MoreProblems)
	var body bytes.Buffer
	require.NoError(t, e.API.Problems(systemtest.Context(t, time.Minute), e.Token("acme"), "acme", st.Generation, &body))
	var got []int
	codes := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(body.String(), "\n"), "\n") {
		var p struct {
			Code      string `json:"code"`
			Line      int    `json:"line"`
			Truncated bool   `json:"truncated"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		require.False(t, p.Truncated, "the list is whole")
		got = append(got, p.Line)
		codes[p.Code]++
	}
	require.Equal(t, want, got)
	require.Equal(t, map[string]int{"duplicate_product_id": 60, "malformed_csv": 60, "unsupported_value": 60}, codes)
}
