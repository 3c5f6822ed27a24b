package snapshot_test

// The differential test of I11 (one definition of valid): what the reader
// accepts, PostgreSQL's jsonb stores and reads back equal; what jsonb
// refuses, the reader refuses. It is in the external test package so that
// the snapshot package stays free of database imports: it sets
// snapshot.Store (export_test.go), through which FuzzCSV, FuzzJSONL (their
// seeds and testdata corpus in every `go test`, every input under
// `go test -fuzz`), TestJSONTestSuite and TestCSVSpectrum check what they
// read against the database, and it holds the tests of the numbers' and
// the nesting's bounds.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/retailcatalog/catalog/functions/core/catalog"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func init() {
	snapshot.Store = snapshot.StoreHooks{Setup: db.setup, Rows: db.rows, JSONB: db.jsonb}
}

// db is the process's connection: one per process (the fuzzing
// coordinator's and each worker's), to the shared server.
var db pgStore

type pgStore struct {
	once sync.Once
	mu   sync.Mutex // a pgx.Conn is not for concurrent use
	conn *pgx.Conn
	err  error
	// checked holds the hashes of the canonical attributes already stored
	// and read back equal by this process: the same bytes give the same
	// answer, and a fuzzer (minimizing an input above all) reads the same
	// rows over and over.
	checked map[catalog.Hash]struct{}
}

// maxChecked bounds pgStore.checked.
const maxChecked = 1 << 20

// The session's own objects: a jsonb column written by binary COPY, as the
// apply writes its staging table, and a function that says what jsonb
// makes of a text (NULL: refused) without failing the statement.
const storeSetupSQL = `
CREATE TEMP TABLE stored (n int PRIMARY KEY, attributes jsonb NOT NULL) ON COMMIT DELETE ROWS;
CREATE FUNCTION pg_temp.try_jsonb(t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN t::jsonb::text;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;`

func (s *pgStore) setup(tb testing.TB) {
	tb.Helper()
	s.once.Do(func() {
		s.err = fmt.Errorf("no database") // until connected (testenv fails tb otherwise)
		url := testenv.Postgres(tb)
		// A fuzzing coordinator starts its workers after this: they take
		// the same server rather than each starting its own.
		os.Setenv(testenv.PostgresURLVar, url)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			s.err = fmt.Errorf("connect: %w", err)
			return
		}
		if _, err := conn.Exec(ctx, storeSetupSQL); err != nil {
			s.err = fmt.Errorf("set up the session: %w", err)
			conn.Close(ctx)
			return
		}
		s.conn, s.err = conn, nil
	})
	if s.err != nil {
		tb.Fatalf("differential test database: %v", s.err)
	}
}

// rows writes rows to jsonb by binary COPY (the apply's way: pgx sends
// []byte to jsonb as its text) and reads them back.
func (s *pgStore) rows(tb testing.TB, rows []snapshot.Row) {
	tb.Helper()
	s.setup(tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	var fresh []snapshot.Row
	for _, row := range rows {
		if _, ok := s.checked[row.Hash]; !ok {
			fresh = append(fresh, row)
		}
	}
	if rows = fresh; len(rows) == 0 {
		return
	}
	ctx := context.Background()
	printed := make([]string, len(rows))
	err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"stored"}, []string{"n", "attributes"},
			pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) { return []any{i, rows[i].Attributes}, nil })); err != nil {
			return err
		}
		out, err := tx.Query(ctx, `SELECT n, attributes::text FROM stored ORDER BY n`)
		if err != nil {
			return err
		}
		for out.Next() {
			var n int
			var text string
			if err := out.Scan(&n, &text); err != nil {
				return err
			}
			printed[n] = text
		}
		return out.Err()
	})
	if err != nil {
		for _, row := range rows {
			if _, ok := s.jsonbLocked(tb, string(row.Attributes)); !ok {
				tb.Fatalf("the reader accepted line %d (%q), jsonb refuses its attributes: %.300q", row.Line, row.ProductID, row.Attributes)
			}
		}
		tb.Fatalf("write %d rows to jsonb: %v", len(rows), err)
	}
	for i, row := range rows {
		requireStoredEqual(tb, row, printed[i])
	}
	if s.checked == nil || len(s.checked) > maxChecked {
		s.checked = map[catalog.Hash]struct{}{}
	}
	for _, row := range rows {
		s.checked[row.Hash] = struct{}{}
	}
}

// requireStoredEqual checks a row against what the database printed of
// its attributes: value-equal (strings byte for byte, numbers as exact
// values), and the canonical form of the print is the row's own, so its
// hash is the one the reconciliation computes from the database.
func requireStoredEqual(tb testing.TB, row snapshot.Row, printed string) {
	tb.Helper()
	want, err := decode([]byte(row.Attributes))
	if err != nil {
		tb.Fatalf("line %d: decode %q: %v", row.Line, row.Attributes, err)
	}
	got, err := decode([]byte(printed))
	if err != nil {
		tb.Fatalf("line %d: decode the database's %q: %v", row.Line, printed, err)
	}
	if !valueEqual(want, got) {
		tb.Fatalf("line %d: stored %.300q, read back %.300q: not the same value", row.Line, row.Attributes, printed)
	}
	canon, err := snapshot.Canonicalize([]byte(printed))
	if err != nil {
		tb.Fatalf("line %d: canonicalize the database's %.300q: %v", row.Line, printed, err)
	}
	if !bytes.Equal(canon, row.Attributes) {
		tb.Fatalf("line %d: the canonical form %.300q, of the database's print %.300q", row.Line, row.Attributes, canon)
	}
	if catalog.HashAttributes(canon) != row.Hash {
		tb.Fatalf("line %d: hash differs from the stored value's", row.Line)
	}
}

func (s *pgStore) jsonb(tb testing.TB, text string) (string, bool) {
	tb.Helper()
	s.setup(tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jsonbLocked(tb, text)
}

func (s *pgStore) jsonbLocked(tb testing.TB, text string) (string, bool) {
	tb.Helper()
	if strings.IndexByte(text, 0) >= 0 {
		return "", false // a PostgreSQL text cannot hold a NUL byte at all
	}
	var out *string
	if err := s.conn.QueryRow(context.Background(), `SELECT pg_temp.try_jsonb($1)`, text).Scan(&out); err != nil {
		tb.Fatalf("jsonb of %.100q: %v", text, err)
	}
	if out == nil {
		return "", false
	}
	return *out, true
}

// jsonbMany is jsonb of many texts in one statement.
func (s *pgStore) jsonbMany(tb testing.TB, texts []string) []*string {
	tb.Helper()
	s.setup(tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.conn.Query(context.Background(), `SELECT pg_temp.try_jsonb(t) FROM unnest($1::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n`, texts)
	require.NoError(tb, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[*string])
	require.NoError(tb, err)
	require.Len(tb, out, len(texts))
	return out
}

func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// valueEqual compares decoded JSON values: numbers by their exact value.
func valueEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valueEqual(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func read(t *testing.T, data string, f snapshot.Format) ([]snapshot.Row, *snapshot.Error) {
	t.Helper()
	r, err := snapshot.NewReader(strings.NewReader(data), f, snapshot.Limits{})
	if se, ok := err.(*snapshot.Error); ok {
		return nil, se
	}
	require.NoError(t, err)
	var rows []snapshot.Row
	for {
		row, err := r.Next()
		if err != nil {
			if se, ok := err.(*snapshot.Error); ok {
				return rows, se
			}
			return rows, nil
		}
		rows = append(rows, row)
	}
}

// numberTexts are JSON numbers around numeric's bounds, and the usual ones.
func numberTexts(rng *rand.Rand) []string {
	texts := []string{
		"0", "-0", "-0.0", "0.000", "1", "-1", "1.50", "1E2", "1e+2", "1e-2", "1.0e1", "1.00e1", "100e-2", "-1.5e-3",
		"123456789012345678901234567890", "0.1", "9.99", "1e0", "1E-0", "0e0", "-0e-0", "2.5e-3", "12.34e5",
		"0e200000", "0e-20000", "1e200000", "1e-20000", "1e-16383", "1e-16384", "1.5e-16383", "0e-16383", "0e-16384",
		"1e131071", "1e131072", "9.9e131071", "-9.9e131071", "99e131070", "1e1073741822", "0e1073741822", "0e1073741823",
		"-0e1073741823", "0e-1073741823", "0e99999999999999999999", "1e-1073741822", "0.0001e131075", "0.0001e131076",
		"0.1e-16382", "0.01e-16382", "1e+0000000000000000000000000005", "0.0e1073741822", "1" + strings.Repeat("0", 131071),
		strings.Repeat("9", 131072), strings.Repeat("9", 131073), "0." + strings.Repeat("9", 16383), "0." + strings.Repeat("9", 16384),
		"-0." + strings.Repeat("0", 16383), "0." + strings.Repeat("9", 20000) + "e3617", "0." + strings.Repeat("9", 20000) + "e3616",
		strings.Repeat("9", 131072) + "." + strings.Repeat("9", 16383), "1" + strings.Repeat("0", 20) + "e131050",
		"1" + strings.Repeat("0", 20) + "e131052", "123.456e-789", "-123123e100000", "123e-10000000",
	}
	// Random ones near the bounds: mantissas of a few to many digits,
	// leading and trailing zeros, exponents that put the value at the edge.
	digits := func(n int, lead, trail bool) string {
		var b strings.Builder
		for i := range n {
			d := byte('0' + rng.IntN(10))
			if (i == 0 && !lead) || (i == n-1 && !trail) {
				d = byte('1' + rng.IntN(9))
			}
			b.WriteByte(d)
		}
		return b.String()
	}
	for range 400 {
		intPart := "0"
		if rng.IntN(3) > 0 {
			intPart = digits(1+rng.IntN(12), false, true)
		}
		var text strings.Builder
		if rng.IntN(2) == 0 {
			text.WriteByte('-')
		}
		text.WriteString(intPart)
		fracLen := 0
		if rng.IntN(2) == 0 {
			fracLen = 1 + rng.IntN(12)
			text.WriteString("." + digits(fracLen, true, rng.IntN(2) == 0))
		}
		var exp int
		switch rng.IntN(4) {
		case 0: // the scale bound
			exp = fracLen - 16383 + rng.IntN(5) - 2
		case 1: // the integer digits bound
			exp = 131072 - len(intPart) + rng.IntN(5) - 2
		case 2:
			exp = rng.IntN(40) - 20
		default:
			exp = 1<<30 - 1 + rng.IntN(3) - 2
			if rng.IntN(2) == 0 {
				exp = -exp
			}
		}
		fmt.Fprintf(&text, "%s%d", []string{"e", "E", "e+"}[rng.IntN(3)], exp)
		if strings.HasSuffix(text.String(), "+-") {
			continue
		}
		texts = append(texts, strings.Replace(text.String(), "e+-", "e-", 1))
	}
	return texts
}

// Numbers: the reader takes exactly the numbers jsonb takes, and writes
// each exactly as the database prints it.
func TestStoredNumbers(t *testing.T) {
	t.Parallel()
	texts := numberTexts(rand.New(rand.NewPCG(11, 12)))
	objects := make([]string, len(texts))
	for i, n := range texts {
		objects[i] = `{"v":` + n + `}`
	}
	printed := db.jsonbMany(t, objects)
	took, refused := 0, 0
	var accepted []snapshot.Row
	for i, n := range texts {
		canon, err := snapshot.Canonicalize([]byte(objects[i]))
		if printed[i] == nil {
			require.Error(t, err, "jsonb refuses %.80s, the reader takes it", n)
			var se *snapshot.Error
			require.ErrorAs(t, err, &se)
			require.Equal(t, snapshot.CodeUnsupportedValue, se.Code, "%.80s", n)
			refused++
			continue
		}
		require.NoError(t, err, "jsonb takes %.80s, the reader refuses it", n)
		back, err := snapshot.Canonicalize([]byte(*printed[i]))
		require.NoError(t, err)
		require.Equal(t, string(back), string(canon), "%.80s", n)
		accepted = append(accepted, snapshot.Row{Attributes: canon, Hash: catalog.HashAttributes(canon), Line: i + 1})
		took++
	}
	// And through the apply's way in, binary COPY.
	db.rows(t, accepted)
	t.Logf("%d number texts: %d taken by both, exactly as printed; %d refused by both", len(texts), took, refused)
	require.Greater(t, took, 100)
	require.Greater(t, refused, 100)
}

// Nesting: the reader's limit is well within what jsonb takes; one level
// more is refused with a code.
func TestStoredNesting(t *testing.T) {
	t.Parallel()
	deep := func(levels int) string {
		// The row's object is the first level.
		return `{"product_id":"p","a":` + strings.Repeat(`[{"b":`, (levels-1)/2) + "1" + strings.Repeat(`}]`, (levels-1)/2) + `}`
	}
	rows, se := read(t, deep(snapshot.MaxNesting-1), snapshot.FormatJSONL)
	require.Nil(t, se)
	db.rows(t, rows)
	_, se = read(t, deep(snapshot.MaxNesting+1), snapshot.FormatJSONL)
	require.NotNil(t, se)
	require.Equal(t, []string{snapshot.CodeUnsupportedValue}, []string{se.Code}, se.Message)
	require.Contains(t, se.Message, "nested deeper than 1000 levels")
	// What jsonb itself takes is far more.
	_, ok := db.jsonb(t, deep(10*snapshot.MaxNesting+1))
	require.True(t, ok, "jsonb takes 10,000 levels with the default max_stack_depth")
}

// The characters jsonb cannot store are refused by the reader, in CSV and
// JSON Lines alike; the C0 controls it can store are taken and stored.
func TestStoredCharacters(t *testing.T) {
	t.Parallel()
	for _, text := range []string{`{"a":"\u0000"}`, `{"a\u0000":1}`, `{"a":{"\u0000":1}}`, `{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, `{"\ud83d":1}`} {
		_, ok := db.jsonb(t, text)
		require.False(t, ok, text)
		_, err := snapshot.Canonicalize([]byte(text))
		var se *snapshot.Error
		require.ErrorAs(t, err, &se, text)
		require.Equal(t, snapshot.CodeUnsupportedValue, se.Code, text)
	}
	_, se := read(t, "product_id,a\np1,x\x00y\n", snapshot.FormatCSV)
	require.NotNil(t, se)
	require.Equal(t, snapshot.CodeUnsupportedValue, se.Code)
	var csv strings.Builder
	csv.WriteString("product_id,a,b\u00a0<&>\n")
	for c := 1; c < 0x20; c++ {
		fmt.Fprintf(&csv, "p%d,\"%c\u2028\u2029\u007f\u0085\"\"\",a\\b/c\n", c, rune(c))
	}
	rows, se := read(t, csv.String(), snapshot.FormatCSV)
	require.Nil(t, se)
	require.Len(t, rows, 0x1f)
	db.rows(t, rows)
}
