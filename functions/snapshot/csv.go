package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// CSV is read by a scanner of its own (encoding/csv allocates per record and
// cannot report the problems below precisely):
//
//   - RFC 4180: comma separator, '"' quoting, "" for a quote inside a quoted
//     field; quoted fields may hold commas, quotes, CR and LF.
//   - Records end at LF or CRLF outside quotes. A CR anywhere else outside
//     quotes is malformed (this rejects CR-only line endings loudly).
//   - Inside a quoted field a CRLF is normalized to LF (every CR right
//     before an LF is dropped), so that a file saved with Windows line
//     endings hashes like the same file with Unix ones. Other CRs are kept.
//   - A '"' in an unquoted field, or anything but ',' or the end of the
//     record after a closing quote, is malformed.
//   - Blank lines (only spaces, tabs and CRs, outside quotes) are ignored
//     anywhere, as encoding/csv ignores empty lines.
//   - The first non-blank record is the header; every record must have the
//     header's number of fields.

// readHeader reads and checks the header. A file without any non-blank
// record has no header and no rows.
func (r *Reader) readHeader() error {
	rec, line, err := r.csvRecord(false)
	if err == io.EOF {
		r.empty = true
		return nil
	}
	if err != nil {
		return err
	}
	if !utf8.Valid(rec) {
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
			return lineErr(CodeDuplicateColumn, line, "column %q appears twice in the header (columns %d and %d)", name, j+1, i+1)
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
				hint = fmt.Sprintf(" (found %q: names are case-sensitive and not trimmed)", name)
				break
			}
		}
		return lineErr(CodeMissingProductIDColumn, line, "the header has no column named \"product_id\"%s", hint)
	}
	for i := range r.names {
		if i != r.idCol {
			r.order = append(r.order, i)
		}
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
	return nil
}

func (r *Reader) nextCSV() (RowView, error) {
	if r.empty {
		return RowView{}, io.EOF
	}
	for {
		rec, line, err := r.csvRecord(r.Lines != nil)
		if err != nil {
			return RowView{}, err
		}
		if rec == nil {
			continue // not in Lines
		}
		id, err := r.csvRow(rec, line)
		if err != nil {
			return RowView{}, err
		}
		return r.view(id, line), nil
	}
}

// csvRow checks a record split into p.fields and builds its canonical
// attributes in p.out; it returns the product_id.
func (p *rowParser) csvRow(rec []byte, line int) ([]byte, error) {
	if len(p.fields) != len(p.names) {
		return nil, lineErr(CodeMalformedCSV, line, "column count %d, header has %d", len(p.fields), len(p.names))
	}
	if !utf8.Valid(rec) {
		for i, f := range p.fields {
			if !utf8.Valid(f) {
				return nil, lineErr(CodeInvalidUTF8, line, "invalid UTF-8 in column %q", p.names[i])
			}
		}
		return nil, lineErr(CodeInvalidUTF8, line, "invalid UTF-8")
	}
	id := p.fields[p.idCol]
	if code, reason := productIDProblem(id); code != "" {
		return nil, lineErr(code, line, "%s", reason)
	}
	out := append(p.out[:0], '{')
	for k, col := range p.order {
		out = append(out, p.prefixes[k]...)
		out = appendJSONString(out, p.fields[col])
	}
	p.out = append(out, '}')
	return id, nil
}

// csvRecord reads the next non-blank record into r.fields. rec is its raw
// text, for the UTF-8 check (quoting only adds or drops ASCII bytes, so rec
// is valid UTF-8 exactly when every field is).
//
// With filter (Lines set), a record that does not start on a wanted line is
// skipped without parsing: rec is nil.
func (r *Reader) csvRecord(filter bool) (rec []byte, line int, err error) {
	for {
		rec, line, quotes, truncated, err := r.record(true)
		if err != nil {
			return nil, 0, err
		}
		if !quotes && !truncated && len(rec) <= r.lim.MaxRowBytes && isBlank(rec) {
			continue
		}
		if filter && !truncated && len(rec) <= r.lim.MaxRowBytes && !r.wanted(line) {
			return nil, line, nil
		}
		if err := r.csvFields(rec, line, quotes, truncated); err != nil {
			return nil, 0, err
		}
		return rec, line, nil
	}
}

// csvFields splits a (non-blank) record into p.fields and checks its size.
func (p *rowParser) csvFields(rec []byte, line int, quotes, truncated bool) error {
	// Parse even a row that is too large: a stray quote can make a
	// record run on for many lines, and pointing at the quote helps more.
	if err := p.parseFields(rec, line, quotes, truncated); err != nil {
		return err
	}
	if truncated || len(rec) > p.lim.MaxRowBytes {
		return p.tooLarge(line)
	}
	return nil
}

// parseFields splits a record into r.fields. With truncated, rec is only the
// start of a record: running out of it inside a quoted field is no error.
func (p *rowParser) parseFields(rec []byte, line int, quotes, truncated bool) *Error {
	if quotes {
		return p.parseQuoted(rec, line, truncated)
	}
	check := rec
	if truncated && len(check) > 0 {
		check = check[:len(check)-1] // may be the CR of a CRLF
	}
	if i := bytes.IndexByte(check, '\r'); i >= 0 {
		return bareCR(line, bytes.Count(rec[:i], []byte{','})+1)
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
	return nil
}

func bareCR(line, field int) *Error {
	return lineErr(CodeMalformedCSV, line, "carriage return in unquoted field %d (lines must end in LF or CRLF; a field holding a CR must be quoted)", field)
}

// parseQuoted splits a record holding quotes, unquoting its fields into
// r.scratch.
func (p *rowParser) parseQuoted(rec []byte, line int, truncated bool) *Error {
	lineAt := func(pos int) int { return line + bytes.Count(rec[:pos], lfBytes) }
	s, offs := p.scratch[:0], p.offs[:0]
	n := len(rec)
	i := 0
	for field := 1; ; field++ {
		if i < n && rec[i] == '"' {
			open := i
			i++
			for {
				j := bytes.IndexByte(rec[i:], '"')
				if j < 0 {
					if truncated {
						return nil
					}
					return lineErr(CodeMalformedCSV, lineAt(open), "quoted field %d is never closed (missing closing quote)", field)
				}
				s = appendNormalized(s, rec[i:i+j])
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
			return lineErr(CodeMalformedCSV, lineAt(i), "unexpected %s after the closing quote of field %d (a quote inside a quoted field must be doubled)", describe(rec[i]), field)
		}
		end := n
		if j := bytes.IndexByte(rec[i:], ','); j >= 0 {
			end = i + j
		}
		fld := rec[i:end]
		if q := bytes.IndexByte(fld, '"'); q >= 0 {
			return lineErr(CodeMalformedCSV, lineAt(i+q), "bare quote in unquoted field %d (quote the field and double the quote)", field)
		}
		if c := bytes.IndexByte(fld, '\r'); c >= 0 && !(truncated && i+c == n-1) {
			return bareCR(lineAt(i+c), field)
		}
		if c := bytes.IndexByte(fld, '\n'); c >= 0 {
			// Unreachable: records end at the first LF with balanced quotes.
			return lineErr(CodeMalformedCSV, lineAt(i+c), "line break in unquoted field %d", field)
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
	return nil
}

// appendNormalized appends the content of a quoted field, dropping every CR
// that comes right before an LF.
func appendNormalized(dst, s []byte) []byte {
	if bytes.IndexByte(s, '\r') < 0 {
		return append(dst, s...)
	}
	for {
		k := bytes.IndexByte(s, '\n')
		if k < 0 {
			return append(dst, s...)
		}
		seg := s[:k]
		for len(seg) > 0 && seg[len(seg)-1] == '\r' {
			seg = seg[:len(seg)-1]
		}
		dst = append(dst, seg...)
		dst = append(dst, '\n')
		s = s[k+1:]
	}
}
