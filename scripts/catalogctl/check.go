package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

func init() {
	register(&Command{
		Name: "check", Args: "FILE", Token: NoToken,
		Summary: "check a snapshot file against the file contract, locally, before uploading it",
		Help: `Reads FILE with the catalog's own reader (the one the diff runs: same
rules, same error codes and line numbers, docs/RETAILERS.md) and reports
whether an upload of it would be read whole: the number of products and the
attribute names, or its problems (up to the first 100, each with its code,
line and message), duplicate product ids included. Nothing is sent
anywhere; no token or API is needed.

The server's own limits apply on top: the size of one upload (5 GiB, or
less where the operator set it) and the holds, which depend on the catalog
already applied (an empty file is always held).

exit codes:
  0  the file can be uploaded
  2  it would be rejected (the problems are listed)
  3  it is empty: an upload would be held until confirmed (empty_snapshot)
  1  FILE cannot be read`,
		Flags: func(fs *flag.FlagSet) Runner {
			format := fs.String("format", "", "`csv` or jsonl (default: from FILE's name, else sniffed as the API does)")
			asJSON := fs.Bool("json", false, `print {"file", "format", "products", "attribute_names", "problems", "more_problems"} on stdout`)
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 1 {
					return c.Usagef("want one FILE, got %d arguments", len(args))
				}
				switch *format {
				case "":
					*format = formatFromName(args[0])
				case "csv", "jsonl":
				default:
					return c.Usagef(`--format must be "csv" or "jsonl", got %q`, *format)
				}
				return checkFile(ctx, c, args[0], snapshot.Format(*format), *asJSON)
			}
		},
	})
}

// checkReport is what check finds in a file (its --json output).
type checkReport struct {
	File           string             `json:"file"`
	Format         snapshot.Format    `json:"format"`
	Products       int64              `json:"products"`
	AttributeNames []string           `json:"attribute_names"`
	Problems       []snapshot.Problem `json:"problems"`
	MoreProblems   bool               `json:"more_problems"`
}

func checkFile(ctx context.Context, c *Call, path string, format snapshot.Format, asJSON bool) error {
	f, _, err := openSnapshot(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rep, err := checkSnapshot(ctx, f, format)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	rep.File = path
	code := 0
	switch {
	case len(rep.Problems) > 0:
		code = 2
	case rep.Products == 0:
		code = 3
	}
	if asJSON {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "%s\n", out)
		return Exit(code, nil)
	}
	switch code {
	case 2:
		for _, p := range rep.Problems {
			fmt.Fprintf(c.Stdout, "%s: %s: %s\n", path, p.Code, p.Message)
		}
		more := ""
		if rep.MoreProblems {
			more = " (and more not listed: fix these and check again)"
		}
		fmt.Fprintf(c.Stderr, "%s would be rejected whole, nothing of it applied: %s%s; each code and its fix: docs/RETAILERS.md\n",
			path, plural(len(rep.Problems), "problem"), more)
	case 3:
		fmt.Fprintf(c.Stdout, "%s: %s, no products: an upload would be held (empty_snapshot) until confirmed, and then delete the whole catalog\n", path, rep.Format)
	default:
		fmt.Fprintf(c.Stdout, "%s: %s, %d products, attributes: %s\n", path, rep.Format, rep.Products, strings.Join(rep.AttributeNames, ", "))
	}
	return Exit(code, nil)
}

// checkSnapshot reads a whole snapshot as the diff does: the reader's
// problems and the duplicate product ids, merged in line order. The error is
// a failure to read r, not a problem of the file.
func checkSnapshot(ctx context.Context, r io.Reader, format snapshot.Format) (checkReport, error) {
	rd, err := snapshot.NewReader(r, format, snapshot.Limits{})
	var rejected *snapshot.Error
	if errors.As(err, &rejected) {
		return checkReport{Format: format, Problems: rejected.List(), MoreProblems: rejected.More}, nil
	}
	if err != nil {
		return checkReport{}, err
	}
	rd.SkipAttributes = true
	rd.Workers = runtime.GOMAXPROCS(0)
	defer rd.Close()
	rep := checkReport{Format: rd.Format()}
	first := map[string]int{} // product_id -> its first line
	var dups []snapshot.Problem
	for {
		if err := ctx.Err(); err != nil {
			return checkReport{}, err
		}
		row, err := rd.Next()
		if err == io.EOF {
			break
		}
		if errors.As(err, &rejected) {
			break
		}
		if err != nil {
			return checkReport{}, err
		}
		if line, seen := first[row.ProductID]; seen {
			dups = append(dups, snapshot.DuplicateProblem(row.ProductID, line, row.Line))
			continue
		}
		first[row.ProductID] = row.Line
		rep.Products++
	}
	if all := snapshot.Merge(rejected, dups...); all != nil {
		rep.Problems, rep.MoreProblems = all.List(), all.More || len(dups) > snapshot.MaxProblems
	}
	rep.AttributeNames = rd.AttributeNames()
	if rep.AttributeNames == nil {
		rep.AttributeNames = []string{}
	}
	return rep, nil
}

// plural is "1 problem", "2 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
