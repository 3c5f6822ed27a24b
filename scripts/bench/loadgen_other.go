//go:build !linux

package main

import (
	"context"
	"errors"
)

// readLoad is the HTTP load generator; it is built on Linux's epoll.
func readLoad(ctx context.Context, args []string) error {
	return errors.New("read-load: the load generator needs Linux (epoll)")
}
