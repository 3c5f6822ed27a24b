//go:build linux

package sqsemulator

import "syscall"

// sysProcAttr puts the child in its own process group (Stop kills the group)
// and has the kernel kill it when the parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
