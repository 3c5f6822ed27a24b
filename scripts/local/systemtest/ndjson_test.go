package systemtest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
)

// The problems route answers JSON Lines (application/x-ndjson): every
// line is validated against the documented schema of one line; the body's
// value is its first line (an empty body: no line to check).
func init() {
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(body io.Reader, _ http.Header, schema *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		s := bufio.NewScanner(body)
		s.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var first any
		for n := 1; s.Scan(); n++ {
			var v any
			if err := json.Unmarshal(s.Bytes(), &v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if err := schema.Value.VisitJSON(v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if n == 1 {
				first = v
			}
		}
		if err := s.Err(); err != nil {
			return nil, err
		}
		if first == nil {
			first = map[string]any{"truncated": true} // an empty answer: nothing to check
		}
		return first, nil
	})
}
