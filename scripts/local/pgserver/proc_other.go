//go:build !linux

package pgserver

import "syscall"

// sysProcAttr puts the child in its own process group and runs it as cred
// when non-nil. Only Linux can tie the child's life to the parent's.
func sysProcAttr(cred *syscall.Credential, _ syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
