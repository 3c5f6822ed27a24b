package diff

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

// problemSpill keeps every problem the reader finds (Reader.AllProblems)
// in a temporary file (JSON Lines, unlinked at creation: gone with the
// process), so that 100,000 problems cost disk, not memory. It notes
// whether the reader stopped at a limit of the whole file.
type problemSpill struct {
	f         *os.File
	enc       *snapshot.ProblemEncoder
	sizeLimit bool // too_many_products or file_too_large was found
}

func newProblemSpill(dir string) (*problemSpill, error) {
	f, err := os.CreateTemp(dir, "problems-*")
	if err != nil {
		return nil, fmt.Errorf("create problem spill: %w", err)
	}
	os.Remove(f.Name())
	return &problemSpill{f: f, enc: snapshot.NewProblemEncoder(f)}, nil
}

// Add keeps one problem.
func (s *problemSpill) Add(p snapshot.Problem) error {
	if p.Code == snapshot.CodeTooManyProducts || p.Code == snapshot.CodeFileTooLarge {
		s.sizeLimit = true
	}
	return s.enc.Add(p)
}

// reader returns what was kept, from the start.
func (s *problemSpill) reader() (io.Reader, error) {
	if err := s.enc.Flush(); err != nil {
		return nil, fmt.Errorf("flush problem spill: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind problem spill: %w", err)
	}
	return s.f, nil
}

func (s *problemSpill) Close() error { return s.f.Close() }

// problemFile is the content of a generation's problems file, written by
// writeProblems.
type problemFile func(w io.Writer) error

// readerProblems is the problems file of a snapshot the reader rejected:
// every problem it found (spill) and the duplicates, in line order (DESIGN
// 13); more says that problems exist past those (the reader stopped at
// problem 100,001, or the sorter counted more duplicates than it kept).
func readerProblems(spill *problemSpill, dups []snapshot.Problem, more bool) problemFile {
	return func(w io.Writer) error {
		var found *snapshot.ProblemDecoder
		if spill != nil {
			rd, err := spill.reader()
			if err != nil {
				return err
			}
			found = snapshot.NewProblemDecoder(rd)
		}
		_, err := snapshot.WriteProblemFile(w, found, dups, more)
		return err
	}
}

// listedProblems is the problems file of a rejection the diff made itself
// (a size limit of the upload or of its stored catalog): its problems.
func listedProblems(se *snapshot.Error) problemFile {
	return func(w io.Writer) error {
		_, err := snapshot.WriteProblemFile(w, nil, se.List(), se.More)
		return err
	}
}

// writeProblems writes the generation's problems file (keys.Problems)
// before its state says that it was read, so that the problems route
// answers as soon as the status does: every problem of a rejected file, an
// empty file for a file read without any. Not for the empty catalog of an
// offboarding or an undo (nothing was uploaded).
func (r *run) writeProblems(ctx context.Context, content problemFile) error {
	if r.decision.ObjectKey == "" {
		return nil
	}
	w, err := r.h.blobs.Create(ctx, keys.Problems(r.job.RetailerID, r.job.Generation))
	if err != nil {
		return fmt.Errorf("write problems file: %w", err)
	}
	if err := content(w); err != nil {
		w.Abort()
		return fmt.Errorf("write problems file: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write problems file: %w", err)
	}
	return nil
}

// noProblems is the problems file of a snapshot read without a problem.
func noProblems(io.Writer) error { return nil }
