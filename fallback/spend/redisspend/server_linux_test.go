package redisspend_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent kills the server if the test binary dies first.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
