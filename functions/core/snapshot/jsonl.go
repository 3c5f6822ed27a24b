package snapshot

import (
	"unicode/utf8"
)

// JSON Lines: one object per line (LF or CRLF); lines holding only spaces,
// tabs and CRs are skipped but counted. Values are re-encoded canonically by
// canonicalizer (canonical.go).

// jsonlParse checks and canonicalizes one non-blank line; it returns the
// product_id.
func (p *rowParser) jsonlParse(raw rawRecord) ([]byte, *Error) {
	if raw.truncated || len(raw.rec) > p.lim.MaxRowBytes {
		return nil, p.tooLarge(raw.line)
	}
	return p.jsonlRow(raw.rec, raw.line)
}

// jsonlRow checks one non-blank JSON line and builds its canonical
// attributes in p.out; it returns the product_id.
func (p *rowParser) jsonlRow(rec []byte, line int) ([]byte, *Error) {
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
		return nil, lineErr(CodeInvalidUTF8, line, "invalid UTF-8 at column %d", col)
	}
	c := &p.canon
	c.maxGrowth, c.delta = p.lim.MaxAttributesBytes, p.lim.Delta
	c.counting = p.countAttrs
	out, jerr := c.object(p.out[:0], rec, true)
	p.out = out
	if jerr != nil {
		return nil, lineErr(jerr.code, line, "%s", jerr.message())
	}
	if !c.idSeen {
		return nil, lineErr(CodeMissingProductID, line, "no \"product_id\" key")
	}
	if !c.idString {
		return nil, lineErr(CodeMissingProductID, line, "product_id is %s, not a string", c.idKind)
	}
	if code, reason := productIDProblem(c.id); code != "" {
		return nil, lineErr(code, line, "%s", reason)
	}
	if e := p.checkSize(line); e != nil {
		return nil, e
	}
	return c.id, nil
}
