package demo

import (
	"os/exec"
	"syscall"
)

// bindToParent makes the kernel send the child SIGTERM if the demo dies
// first (killed, or a closed stdout pipe), so no gateway is left behind.
func bindToParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
