//go:build !linux

package main

import (
	"errors"
	"time"
)

// serverCPU needs Linux's /proc.
func serverCPU(dataDir string) (time.Duration, error) {
	return 0, errors.New("the server's CPU time is read from /proc (Linux)")
}

// processCPU needs Linux's getrusage here.
func processCPU() time.Duration { return 0 }
