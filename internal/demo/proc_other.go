//go:build !linux

package demo

import "os/exec"

// bindToParent is a no-op where the kernel offers no parent-death signal;
// the demo still stops its gateways on every normal exit.
func bindToParent(*exec.Cmd) {}
