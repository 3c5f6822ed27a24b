package message

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
)

// ErrChunkChecksum reports a chunk object whose SHA-256 is not the one its
// message names: another object than the diff sent (never applied).
var ErrChunkChecksum = errors.New("chunk object does not match the checksum of its message")

// MaxChunkLineBytes bounds one line of a chunk object: a product's
// canonical attributes (at most 256 KiB, snapshot's attributes_too_large)
// and its id, with room to spare. A longer line is not a chunk the diff
// wrote.
const MaxChunkLineBytes = 32 << 20

// arenaBlock is the size of the blocks a chunk's attributes are copied
// into: a few large allocations per chunk instead of one per product.
const arenaBlock = 1 << 20

// DecodeChunk decodes a chunk object while it streams in: each line is
// decoded as it arrives, so nothing of the object is held but the ops
// themselves (their attributes share a few large blocks); the object is
// never held whole beside its ops. With sha256Hex, the SHA-256 of every byte
// read is checked at the end: ErrChunkChecksum when it differs (the ops are
// then not returned).
func DecodeChunk(r io.Reader, sha256Hex string) ([]ChunkOp, error) {
	var sum hash.Hash
	if sha256Hex != "" {
		sum = sha256.New()
		r = io.TeeReader(r, sum)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		ops   []ChunkOp
		arena []byte
		long  []byte // a line longer than br's buffer, gathered
	)
	keep := func(b []byte) []byte {
		if len(b) > cap(arena)-len(arena) {
			arena = make([]byte, 0, max(arenaBlock, len(b)))
		}
		start := len(arena)
		arena = append(arena, b...)
		return arena[start:len(arena):len(arena)]
	}
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], b...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= MaxChunkLineBytes {
				b, err = br.ReadSlice('\n')
				long = append(long, b...)
			}
			if len(long) > MaxChunkLineBytes {
				return nil, fmt.Errorf("chunk line %d: longer than %d bytes", line, MaxChunkLineBytes)
			}
			b = long
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("read chunk: %w", err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			op, ok := parseChunkLine(t)
			if ok && len(op.Attributes) > 0 {
				op.Attributes = keep(op.Attributes)
			} else if !ok {
				op = ChunkOp{}
				if jerr := json.Unmarshal(t, &op); jerr != nil {
					return nil, fmt.Errorf("chunk line %d: %w", line, jerr)
				}
			}
			if op.ProductID == "" || (op.Op != OpUpsert && op.Op != OpDelete) {
				return nil, fmt.Errorf("chunk line %d: bad op %q for product %q", line, op.Op, op.ProductID)
			}
			if op.Op == OpUpsert && (len(op.Attributes) == 0 || op.Hash == "") {
				return nil, fmt.Errorf("chunk line %d: upsert of %q without attributes or hash", line, op.ProductID)
			}
			ops = append(ops, op)
		}
		if err == io.EOF {
			break
		}
	}
	if sum != nil {
		if got := hex.EncodeToString(sum.Sum(nil)); got != sha256Hex {
			return nil, fmt.Errorf("%w: read %s, want %s", ErrChunkChecksum, got, sha256Hex)
		}
	}
	return ops, nil
}
