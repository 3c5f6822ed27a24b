package systemtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// DESIGN 13, every problem: a file of 150,000 bad rows is rejected with the
// first 100 problems in its status, and the problems route answers the
// first 100,000 of them in line order, then {"truncated":true}; before its
// file is read a generation has none (409 problems_unavailable).
func TestEveryProblemOfALargeFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	token := e.Onboard("r1")
	ctx := systemtest.Context(t, 3*time.Minute)

	slot, err := e.API.Reserve(ctx, token, "r1", "")
	require.NoError(t, err)
	var sink bytes.Buffer
	requireHTTPStatus(t, e.API.Problems(ctx, token, "r1", slot.Generation, &sink), http.StatusConflict)

	var b strings.Builder
	b.WriteString("product_id,title\n")
	for i := range 150_000 {
		fmt.Fprintf(&b, "p%d,title,extra\n", i) // malformed_csv: column count 3, header has 2
	}
	require.NoError(t, e.API.Put(ctx, slot, []byte(b.String())))
	st := e.Wait("r1", slot.Generation)
	require.Equal(t, "rejected", st.State)
	require.Len(t, st.Error.Problems, 100)
	require.True(t, st.Error.MoreProblems)

	var body bytes.Buffer
	require.NoError(t, e.API.Problems(ctx, token, "r1", slot.Generation, &body))
	lines := strings.Split(strings.TrimSuffix(body.String(), "\n"), "\n")
	require.Len(t, lines, 100_001)
	require.Equal(t, `{"truncated":true}`, lines[100_000])
	for i, l := range lines[:100_000] {
		var p struct {
			Code    string `json:"code"`
			Line    int    `json:"line"`
			Message string `json:"message"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		require.Equal(t, "malformed_csv", p.Code)
		require.Equal(t, i+2, p.Line, "line order")
		if i < 100 {
			require.Equal(t, st.Error.Problems[i].Message, p.Message, "the status lists the first 100 of the same list")
		}
	}
}
