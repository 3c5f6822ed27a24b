package snapshot

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readDelta reads a delta file whole into its ops.
func readDelta(t *testing.T, in string, format Format) []DeltaOp {
	t.Helper()
	rd, err := NewReader(strings.NewReader(in), format, Limits{Delta: true})
	require.NoError(t, err)
	var ops []DeltaOp
	for {
		row, err := rd.Next()
		if err == io.EOF {
			return ops
		}
		require.NoError(t, err)
		op, err := ParseDelta(row, rd.Format())
		require.NoError(t, err)
		ops = append(ops, op)
	}
}

func TestDeltaRowsMergeDeleteAndRemove(t *testing.T) {
	t.Parallel()
	ops := readDelta(t, `{"product_id":"p1","price":"9.99","color":null}
{"product_id":"p2","_delete":true,"price":1}
{"product_id":"p3","_delete":false,"n":1E2,"gone":null}
`, FormatJSONL)
	require.Len(t, ops, 3)
	after, exists, err := ops[0].Apply([]byte(`{"color":"red","price":"5","title":"T"}`), 0)
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, `{"price":"9.99","title":"T"}`, string(after))
	require.True(t, ops[1].Delete)
	_, exists, err = ops[1].Apply([]byte(`{"a":1}`), 0)
	require.NoError(t, err)
	require.False(t, exists)
	// An insert: the null attribute is absent, _delete false is no attribute.
	after, exists, err = ops[2].Apply(nil, 0)
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, `{"n":100}`, string(after))
	// Too large once merged: refused on the row's line (I11).
	_, _, err = ops[0].Apply([]byte(`{"title":"`+strings.Repeat("x", 100)+`"}`), 64)
	var se *Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, CodeAttributesTooLarge, se.Code)
	require.Equal(t, 1, se.Line)
}

func TestDeltaCSVDeleteCell(t *testing.T) {
	t.Parallel()
	ops := readDelta(t, "product_id,price,_delete\np1,3,true\np2,4,false\np3,5,\np4,6,TRUE\n", FormatCSV)
	require.Len(t, ops, 4)
	require.True(t, ops[0].Delete)
	for _, op := range ops[1:] {
		require.False(t, op.Delete, op.ProductID)
		require.NotContains(t, op.Set, DeleteAttribute)
	}
	after, _, err := ops[3].Apply([]byte(`{"title":"x"}`), 0)
	require.NoError(t, err)
	require.Equal(t, `{"price":"6","title":"x"}`, string(after))
}

func TestComposeDelta(t *testing.T) {
	t.Parallel()
	set := func(kv string) DeltaOp {
		ops := readDelta(t, `{"product_id":"p",`+kv+`}`, FormatJSONL)
		return ops[0]
	}
	del := DeltaOp{ProductID: "p", Delete: true}
	base := []byte(`{"a":1,"b":2}`)
	for _, c := range []struct {
		name string
		ops  []DeltaOp
		want string // "" absent
	}{
		{"merge then merge", []DeltaOp{set(`"a":5`), set(`"b":null,"c":3`)}, `{"a":5,"c":3}`},
		{"delete then set", []DeltaOp{del, set(`"c":3,"d":null`)}, `{"c":3}`},
		{"set then delete", []DeltaOp{set(`"c":3`), del}, ""},
	} {
		op := c.ops[0]
		for _, next := range c.ops[1:] {
			op = ComposeDelta(op, next)
		}
		// The composition does what the rows do one after another.
		after, exists, err := op.Apply(base, 0)
		require.NoError(t, err, c.name)
		step, stepExists := base, true
		for _, o := range c.ops {
			var b []byte
			if stepExists {
				b = step
			}
			step, stepExists, err = o.Apply(b, 0)
			require.NoError(t, err)
		}
		require.Equal(t, stepExists, exists, c.name)
		if c.want == "" {
			require.False(t, exists, c.name)
			continue
		}
		require.Equal(t, c.want, string(after), c.name)
		require.Equal(t, string(step), string(after), c.name)
	}
}

func TestAppendJSONLineReadsBack(t *testing.T) {
	t.Parallel()
	line := string(AppendJSONLine(nil, "p\"1", []byte(`{"a":[1,2],"b":"x"}`))) + string(AppendJSONLine(nil, "p2", []byte(`{}`)))
	rd, err := NewReader(strings.NewReader(line), FormatJSONL, Limits{})
	require.NoError(t, err)
	r1, err := rd.Next()
	require.NoError(t, err)
	require.Equal(t, "p\"1", r1.ProductID)
	require.Equal(t, `{"a":[1,2],"b":"x"}`, string(r1.Attributes))
	r2, err := rd.Next()
	require.NoError(t, err)
	require.Equal(t, "{}", string(r2.Attributes))
}

// A _delete that is neither a delete nor a keep is a problem of its row:
// "True", "1", "true " in CSV, a string or a number in JSON Lines.
func TestDeltaDeleteProblem(t *testing.T) {
	t.Parallel()
	rows := func(in string, format Format) []Row {
		rd, err := NewReader(strings.NewReader(in), format, Limits{Delta: true})
		require.NoError(t, err)
		var out []Row
		for {
			row, err := rd.Next()
			if err == io.EOF {
				return out
			}
			require.NoError(t, err)
			out = append(out, row)
		}
	}
	csvRows := rows("product_id,price,_delete\nok1,1,true\nok2,2,false\nok3,3,\nbad1,4,True\nbad2,5,TRUE\nbad3,6,true \nbad4,7,1\nbad5,8,yes\n", FormatCSV)
	jsonRows := rows(`{"product_id":"ok1","_delete":true}
{"product_id":"ok2","_delete":false}
{"product_id":"ok3","_delete":null}
{"product_id":"ok4","price":"1"}
{"product_id":"bad1","_delete":"true"}
{"product_id":"bad2","_delete":1}
{"product_id":"bad3","_delete":"True"}
{"product_id":"bad4","_delete":[true]}
`, FormatJSONL)
	for format, rs := range map[Format][]Row{FormatCSV: csvRows, FormatJSONL: jsonRows} {
		for _, row := range rs {
			se := DeleteProblem(row, format)
			if strings.HasPrefix(row.ProductID, "ok") {
				require.Nil(t, se, "%v %s", format, row.ProductID)
				continue
			}
			require.NotNil(t, se, "%v %s", format, row.ProductID)
			require.Equal(t, CodeUnsupportedValue, se.Code)
			require.Equal(t, row.Line, se.Line)
			require.Contains(t, se.Message, "_delete")
		}
	}
}
