package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverCPU is the CPU time (user and system) the PostgreSQL server of
// dataDir has used so far: its postmaster's, every live child's (the
// backends of a pool's open connections among them) and the children's it
// has reaped (the backends of closed connections: pgbench's). A child that
// exited and is not reaped yet is missed, so a figure is a difference over
// a run whose connections close before its end is sampled.
func serverCPU(dataDir string) (time.Duration, error) {
	pidFile, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	postmaster, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ... utime stime: fields 4, 14 and 15; comm may hold spaces.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 15 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); pid != postmaster && ppid != postmaster {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
		if pid == postmaster { // and the children it has reaped: backends of closed connections
			cutime, _ := strconv.ParseInt(f[13], 10, 64)
			cstime, _ := strconv.ParseInt(f[14], 10, 64)
			ticks += cutime + cstime
		}
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// processCPU is the CPU time (user and system) this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
