package snapshot

import (
	"unicode/utf8"
)

// JSON Lines: one object per line (LF or CRLF); lines holding only spaces,
// tabs and CRs are skipped but counted. Values are re-encoded canonically by
// canonicalizer (canonical.go).

func (r *Reader) nextJSONL() (Row, error) {
	for {
		rec, line, _, truncated, err := r.record(false)
		if err != nil {
			return Row{}, err
		}
		if truncated || len(rec) > r.lim.MaxRowBytes {
			return Row{}, r.tooLarge(line)
		}
		if isBlank(rec) {
			continue
		}
		if !utf8.Valid(rec) {
			col := 1
			for len(rec) > 0 {
				c, size := utf8.DecodeRune(rec)
				if c == utf8.RuneError && size == 1 {
					break
				}
				rec = rec[size:]
				col += size
			}
			return Row{}, lineErr(CodeInvalidUTF8, line, "invalid UTF-8 at column %d", col)
		}
		c := &r.canon
		out, jerr := c.object(r.out[:0], rec, true)
		r.out = out
		if jerr != nil {
			return Row{}, lineErr(jerr.code, line, "%s", jerr.message())
		}
		if !c.idSeen {
			return Row{}, lineErr(CodeMissingProductID, line, "no \"product_id\" key")
		}
		if !c.idString {
			return Row{}, lineErr(CodeMissingProductID, line, "product_id is %s, not a string", c.idKind)
		}
		if code, reason := productIDProblem(c.id); code != "" {
			return Row{}, lineErr(code, line, "%s", reason)
		}
		return r.emit(c.id, line), nil
	}
}
