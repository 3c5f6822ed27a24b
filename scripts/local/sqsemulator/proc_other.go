//go:build !linux

package sqsemulator

import "syscall"

// sysProcAttr puts the child in its own process group (Stop kills the group).
// Only Linux can tie the child's life to the parent's.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
