package pgserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/retailcatalog/catalog/scripts/local/filelock"
)

// templateVersion changes whenever the initdb options change, so that an
// old template is not reused.
const templateVersion = "1"

// initdbArgs are the options of every new cluster: trust authentication
// (loopback only, see listen_addresses), superuser "postgres", UTF8, locale C.
var initdbArgs = []string{"-U", "postgres", "--auth=trust",
	"--encoding=UTF8", "--locale=C", "--no-instructions",
	// Skipping initdb's final fsync saves seconds; the running server fsyncs
	// as usual, and after a crash PostgreSQL fsyncs the whole data directory
	// before recovery.
	"--no-sync"}

// initdb fills the empty directory dir with a new cluster. initdb is slow
// (1.5s on an idle machine, over 10s on a busy one), so it runs once per
// machine into a template (see templateDir) that is then copied. All clusters
// made this way share one system identifier, which only matters for WAL
// streaming between unrelated clusters (StartReplica always copies its
// primary).
func (s *Server) initdb(ctx context.Context, dir string) error {
	tpl, err := s.templateDir(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(s.progress, "pgserver: new cluster in %s (copy of %s)\n", s.dataDir, tpl)
	return s.copyTree(tpl, dir)
}

// templateDir returns a freshly initdb'd, never started cluster, creating it
// on first use under os.TempDir() (one per user and templateVersion). A file
// lock makes concurrent processes create it once.
func (s *Server) templateDir(ctx context.Context) (string, error) {
	base := filepath.Join(os.TempDir(), "catalog-local-pg15-template-v"+templateVersion+"-uid"+strconv.Itoa(os.Geteuid()))
	data := filepath.Join(base, "data")
	ready := filepath.Join(base, "READY")
	if _, err := os.Stat(ready); err == nil {
		return data, nil
	}
	unlock, err := filelock.Acquire(ctx, base+".lock", s.progress, "creating the PostgreSQL template cluster")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(ready); err == nil {
		return data, nil
	}

	tmp := base + ".creating"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("pgserver: remove leftover %s: %w", tmp, err)
	}
	if err := os.RemoveAll(base); err != nil {
		return "", fmt.Errorf("pgserver: remove incomplete template %s: %w", base, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("pgserver: create %s: %w", tmp, err)
	}
	tmpData := filepath.Join(tmp, "data")
	if err := s.mkdirOwned(tmpData); err != nil {
		return "", err
	}
	fmt.Fprintf(s.progress, "pgserver: initdb template cluster %s (once per machine)\n", data)
	if err := s.runTool(ctx, "initdb", append([]string{"-D", tmpData}, initdbArgs...)...); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "READY"), []byte(templateVersion+"\n"), 0o644); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("pgserver: mark template ready: %w", err)
	}
	if err := os.Rename(tmp, base); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("pgserver: move template into %s: %w", base, err)
	}
	return data, nil
}

// copyTree copies the contents of the directory src into the existing
// directory dst, keeping modes and giving everything to the server user.
func (s *Server) copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected file type %s", info.Mode().Type())
		}
		return s.chown(target)
	})
	if err != nil {
		return fmt.Errorf("pgserver: copy template cluster into %s: %w", dst, err)
	}
	return nil
}

func copyFile(src, dst string, perm fs.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return errors.Join(err, os.Remove(dst))
	}
	return nil
}
