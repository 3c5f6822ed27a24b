// Package filelock serializes one-time setup work (installing PostgreSQL or
// the queue emulator, creating a template cluster) between processes that
// may run it at once, such as parallel test packages.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Acquire takes an exclusive flock on path, polling so that ctx can cancel
// the wait, and says once on progress (which may be nil) that it is waiting
// for another process doing what. The returned function releases the lock.
func Acquire(ctx context.Context, path string, progress io.Writer, what string) (release func(), err error) {
	if progress == nil {
		progress = io.Discard
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	announced := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !announced {
			fmt.Fprintf(progress, "waiting for another process %s (lock %s)\n", what, path)
			announced = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
