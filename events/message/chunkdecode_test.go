package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// DecodeChunk gives ReadChunk's ops whatever the reads look like (one byte
// at a time, lines longer than its buffer), checks the checksum of every
// byte, and refuses a line over MaxChunkLineBytes.
func TestDecodeChunkStreams(t *testing.T) {
	t.Parallel()
	big := `{"d":"` + strings.Repeat("x", 300<<10) + `"}` // longer than the read buffer
	var body []byte
	var want []ChunkOp
	for i, attrs := range []string{`{"a":"1"}`, big, `{}`, big} {
		id := "p" + string(rune('a'+i))
		var h [16]byte
		h[0] = byte(i)
		body = AppendUpsertLine(body, []byte(id), h, []byte(attrs))
		body = AppendDeleteLine(body, "gone"+id)
		want = append(want, ChunkOp{Op: OpUpsert, ProductID: id, Hash: hex.EncodeToString(h[:]), Attributes: []byte(attrs)},
			ChunkOp{Op: OpDelete, ProductID: "gone" + id})
	}
	sum := sha256.Sum256(body)
	good := hex.EncodeToString(sum[:])
	got, err := DecodeChunk(bytes.NewReader(body), good)
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = DecodeChunk(iotest.OneByteReader(bytes.NewReader(body)), good)
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = DecodeChunk(iotest.HalfReader(bytes.NewReader(body[:len(body)-1])), "") // no final newline
	require.NoError(t, err)
	require.Equal(t, want, got)

	_, err = DecodeChunk(bytes.NewReader(body), "00"+good[2:])
	require.ErrorIs(t, err, ErrChunkChecksum)
	_, err = DecodeChunk(bytes.NewReader(append(bytes.Clone(body), '\n')), good)
	require.ErrorIs(t, err, ErrChunkChecksum, "one byte more is another object")

	huge := AppendUpsertLine(nil, []byte("p"), [16]byte{}, []byte(`{"d":"`+strings.Repeat("y", MaxChunkLineBytes)+`"}`))
	_, err = DecodeChunk(bytes.NewReader(huge), "")
	require.ErrorContains(t, err, "longer than")
}

// The line sizes the diff plans chunks with are the lines' real sizes.
func TestLineLens(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"sku-1", "a/b c", `q"uote`, `back\slash`, "<tag>&", "é", "tab\there", "\u2028", "x\x7f", strings.Repeat("z", 256)} {
		for _, attrs := range []string{`{}`, `{"a":"b"}`, `{"d":"` + strings.Repeat("é", 1000) + `"}`} {
			require.Equal(t, len(AppendUpsertLine(nil, []byte(id), [16]byte{}, []byte(attrs))), UpsertLineLen([]byte(id), len(attrs)), id)
		}
		require.Equal(t, len(AppendDeleteLine(nil, id)), DeleteLineLen(id), id)
	}
}
