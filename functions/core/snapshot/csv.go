package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// CSV is read by a scanner of its own (encoding/csv allocates per record and
// cannot report the problems below precisely):
//
//   - RFC 4180: comma separator, '"' quoting, "" for a quote inside a quoted
//     field; quoted fields may hold commas, quotes, CR and LF.
//   - Only a field that starts with '"' is a quoted field; it must end at a
//     ',' or at the end of the record ("abc"def is malformed). A '"' anywhere
//     else is a literal character: Monitor 27" wide is one field, as real
//     exports write it.
//   - The content of a quoted field is kept byte for byte: a CRLF inside it
//     stays CRLF.
//   - Records end at LF or CRLF outside quoted fields. A CR anywhere else
//     outside quoted fields is malformed (this rejects CR-only line endings
//     loudly).
//   - Blank lines (only spaces, tabs and CRs, outside quotes) are ignored
//     anywhere, as encoding/csv ignores empty lines.
//   - The first non-blank record is the header; every record must have the
//     header's number of fields.
//
// Record boundaries come from splitState.split, which follows the same
// rules, so a malformed record ends where the parse of its fields would end
// it and the reader goes on with the next one.

// readHeader reads and checks the header. A file without any non-blank
// record has no header and no rows.
func (r *Reader) readHeader() error {
	raw, err := r.record(true)
	for err == nil && r.blank(&raw) {
		raw, err = r.record(true)
	}
	if err == io.EOF {
		r.empty = true
		return nil
	}
	if err != nil {
		return err
	}
	if e := r.csvFields(raw); e != nil {
		return e
	}
	line := raw.line
	if !utf8.Valid(raw.rec) {
		return lineErr(CodeInvalidUTF8, line, "invalid UTF-8 in the header")
	}
	r.names = make([]string, len(r.fields))
	blank := true
	for i, f := range r.fields {
		r.names[i] = string(f)
		blank = blank && len(f) == 0
	}
	if blank {
		return lineErr(CodeEmptyHeader, line, "the header has no column names")
	}
	seen := make(map[string]int, len(r.names))
	r.idCol = -1
	for i, name := range r.names {
		if j, ok := seen[name]; ok {
			return lineErr(CodeDuplicateColumn, line, "column %s appears twice in the header (columns %d and %d)", quoteCutString(name), j+1, i+1)
		}
		seen[name] = i
		if name == "product_id" {
			r.idCol = i
		}
	}
	if r.idCol < 0 {
		hint := ""
		for _, name := range r.names {
			if strings.EqualFold(strings.TrimSpace(name), "product_id") {
				hint = fmt.Sprintf(" (found %s: names are case-sensitive and not trimmed)", quoteCutString(name))
				break
			}
		}
		if hint == "" && bytes.HasPrefix(bytes.TrimLeft(raw.rec, " \t"), []byte("{")) {
			hint = " (the file looks like JSON Lines but was read as CSV)"
		}
		return lineErr(CodeMissingProductIDColumn, line, "the header has no column named \"product_id\"%s", hint)
	}
	for i, name := range r.names {
		if i == r.idCol {
			continue
		}
		if code, reason := attributeNameProblem([]byte(name), r.lim.Delta); code != "" {
			return lineErr(code, line, "column %d: %s", i+1, reason)
		}
		r.order = append(r.order, i)
	}
	slices.SortFunc(r.order, func(a, b int) int { return strings.Compare(r.names[a], r.names[b]) })
	for k, col := range r.order {
		var p []byte
		if k > 0 {
			p = append(p, ',')
		}
		p = appendJSONString(p, []byte(r.names[col]))
		r.prefixes = append(r.prefixes, append(p, ':'))
	}
	// A plain record's canonical form is these and its fields, in turn.
	for k := range r.order {
		seg := []byte{'"'}
		if k == 0 {
			seg[0] = '{'
		}
		seg = append(append(seg, r.prefixes[k]...), '"')
		r.plainSegs = append(r.plainSegs, seg)
	}
	return nil
}

// csvParse splits, checks and canonicalizes one record; it returns the
// product_id.
func (p *rowParser) csvParse(raw rawRecord) ([]byte, *Error) {
	if e := p.csvFields(raw); e != nil {
		return nil, e
	}
	return p.csvRow(raw.rec, raw.line)
}

// csvRow checks a record split into p.fields and builds its canonical
// attributes in p.out; it returns the product_id.
func (p *rowParser) csvRow(rec []byte, line int) ([]byte, *Error) {
	if len(p.fields) != len(p.names) {
		return nil, lineErr(CodeMalformedCSV, line, "column count %d, header has %d", len(p.fields), len(p.names))
	}
	if !p.plain && !utf8.Valid(rec) {
		for i, f := range p.fields {
			if !utf8.Valid(f) {
				return nil, lineErr(CodeInvalidUTF8, line, "invalid UTF-8 in column %s", quoteCutString(p.names[i]))
			}
		}
		return nil, lineErr(CodeInvalidUTF8, line, "invalid UTF-8")
	}
	id := p.fields[p.idCol]
	// A plain record is ASCII without control characters but DEL: its
	// id's checks come down to the length and DEL (the same problems).
	if !p.plain || len(id) == 0 || len(id) > MaxProductIDBytes || bytes.IndexByte(id, 0x7f) >= 0 {
		if code, reason := productIDProblem(id); code != "" {
			return nil, lineErr(code, line, "%s", reason)
		}
	}
	// A NUL byte is the one character a cell may not hold: the catalog's
	// jsonb cannot store U+0000. A plain record has none.
	if !p.plain && bytes.IndexByte(rec, 0) >= 0 {
		for _, col := range p.order {
			if bytes.IndexByte(p.fields[col], 0) >= 0 {
				return nil, lineErr(CodeUnsupportedValue, line, "column %s holds a NUL byte (U+0000), which the catalog cannot store", quoteCutString(p.names[col]))
			}
		}
	}
	if p.plain && len(p.order) > 0 {
		// Valid UTF-8 with nothing to escape: each field is its own JSON
		// content, between the constant parts of the object.
		out := p.out[:0]
		for k, col := range p.order {
			out = append(out, p.plainSegs[k]...)
			out = append(out, p.fields[col]...)
		}
		p.out = append(out, '"', '}')
	} else {
		out := append(p.out[:0], '{')
		for k, col := range p.order {
			out = append(out, p.prefixes[k]...)
			out = appendJSONString(out, p.fields[col])
		}
		p.out = append(out, '}')
	}
	if e := p.checkSize(line); e != nil {
		return nil, e
	}
	if p.countAttrs {
		if len(p.csvValued) != len(p.order) {
			p.csvValued = make([]int64, len(p.order))
		}
		p.csvRows++
		for k, col := range p.order {
			if len(p.fields[col]) > 0 {
				p.csvValued[k]++
			}
		}
	}
	return id, nil
}

// csvFields splits a (non-blank) record into p.fields and checks its size.
func (p *rowParser) csvFields(raw rawRecord) *Error {
	// Parse even a row that is too large: a malformed field says more.
	open, err := p.parseFields(raw.rec, raw.line, raw.quotes, raw.truncated)
	if err != nil {
		return err
	}
	if raw.truncated || len(raw.rec) > p.lim.MaxRowBytes {
		e := p.tooLarge(raw.line)
		if n := bytes.Count(raw.rec, lfBytes); open > 0 && n > 0 {
			e = lineErr(CodeRowTooLarge, raw.line, "row is longer than the limit of %d bytes: the quoted field %d opened on this line is still open %d lines further (a missing closing quote?)",
				p.lim.MaxRowBytes, open, n)
		}
		return e
	}
	return nil
}

// parseFields splits a record into p.fields. With truncated, rec is only the
// start of a record: running out of it inside a quoted field is no error,
// and open is that field's number.
func (p *rowParser) parseFields(rec []byte, line int, quotes, truncated bool) (open int, err *Error) {
	p.plain = false
	if quotes {
		return p.parseQuoted(rec, line, truncated)
	}
	if !truncated && p.splitPlain(rec) {
		p.plain = true
		return 0, nil
	}
	check := rec
	if truncated && len(check) > 0 {
		check = check[:len(check)-1] // may be the CR of a CRLF
	}
	if i := bytes.IndexByte(check, '\r'); i >= 0 {
		return 0, bareCR(line, bytes.Count(rec[:i], []byte{','})+1, "")
	}
	f := p.fields[:0]
	for {
		i := bytes.IndexByte(rec, ',')
		if i < 0 {
			break
		}
		f = append(f, rec[:i])
		rec = rec[i+1:]
	}
	p.fields = append(f, rec)
	return 0, nil
}

// splitPlain splits a record without quotes into p.fields when all of it
// is plain: ASCII with nothing JSON escapes (no control character, no
// backslash), which a record holds almost always. It looks at 8 bytes at a
// time, finding the commas in each word at once; on anything else it
// returns false and the caller takes the general way.
func (p *rowParser) splitPlain(rec []byte) bool {
	f := p.fields[:0]
	start, i := 0, 0
	for ; i+8 <= len(rec); i += 8 {
		w := binary.LittleEndian.Uint64(rec[i:])
		if w&hi7 != 0 || mayNeedEscape(w) {
			return false
		}
		for m := zeroBytes(w ^ (',' * lo7)); m != 0; m &= m - 1 {
			j := i + bits.TrailingZeros64(m)>>3
			f = append(f, rec[start:j])
			start = j + 1
		}
	}
	for ; i < len(rec); i++ {
		c := rec[i]
		if c >= utf8.RuneSelf || strEscape[c] != 0 {
			return false
		}
		if c == ',' {
			f = append(f, rec[start:i])
			start = i + 1
		}
	}
	p.fields = append(f, rec[start:])
	return true
}

// zeroBytes has the high bit set in exactly the bytes of v that are zero
// (no borrow crosses bytes, unlike the usual has-zero test).
func zeroBytes(v uint64) uint64 {
	const low7 = 0x7F7F7F7F7F7F7F7F
	return ^((v&low7 + low7) | v | low7)
}

func bareCR(line, field int, where string) *Error {
	return lineErr(CodeMalformedCSV, line, "carriage return in unquoted field %d%s (lines must end in LF or CRLF; a field holding a CR must be quoted)", field, where)
}

// parseQuoted splits a record holding quotes, unquoting its quoted fields
// into p.scratch. The rules are those of splitState.split.
func (p *rowParser) parseQuoted(rec []byte, line int, truncated bool) (open int, err *Error) {
	// where says on which line of a record spanning lines a problem is.
	where := func(pos int) string {
		if n := bytes.Count(rec[:pos], lfBytes); n > 0 {
			return fmt.Sprintf(" (%d lines further down, on line %d)", n, line+n)
		}
		return ""
	}
	s, offs := p.scratch[:0], p.offs[:0]
	n := len(rec)
	i := 0
	for field := 1; ; field++ {
		if i < n && rec[i] == '"' {
			i++
			for {
				j := bytes.IndexByte(rec[i:], '"')
				if j < 0 {
					if truncated {
						return field, nil
					}
					return 0, lineErr(CodeMalformedCSV, line, "quoted field %d is never closed (missing closing quote)", field)
				}
				s = append(s, rec[i:i+j]...)
				i += j + 1
				if i < n && rec[i] == '"' {
					s = append(s, '"')
					i++
					continue
				}
				break
			}
			offs = append(offs, len(s))
			if i == n {
				break
			}
			if rec[i] == ',' {
				i++
				continue
			}
			if rec[i] == '\r' && truncated && i == n-1 {
				break
			}
			return 0, lineErr(CodeMalformedCSV, line, "unexpected %s after the closing quote of field %d%s (a quoted field ends at a separator; a quote inside it must be doubled)",
				describe(rec[i]), field, where(i))
		}
		end := n
		if j := bytes.IndexByte(rec[i:], ','); j >= 0 {
			end = i + j
		}
		fld := rec[i:end] // a '"' in it is a literal character
		if c := bytes.IndexByte(fld, '\r'); c >= 0 && !(truncated && i+c == n-1) {
			return 0, bareCR(line, field, where(i+c))
		}
		s = append(s, fld...)
		offs = append(offs, len(s))
		if end == n {
			break
		}
		i = end + 1
	}
	f := p.fields[:0]
	prev := 0
	for _, o := range offs {
		f = append(f, s[prev:o:o])
		prev = o
	}
	p.fields, p.scratch, p.offs = f, s, offs
	return 0, nil
}
