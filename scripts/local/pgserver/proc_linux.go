//go:build linux

package pgserver

import "syscall"

// sysProcAttr puts the child in its own process group (so a terminal's
// Ctrl-C reaches only the parent, which then stops the server in order), runs
// it as cred when non-nil, and makes the kernel send it deathSig when the
// parent dies.
func sysProcAttr(cred *syscall.Credential, deathSig syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: deathSig}
}
