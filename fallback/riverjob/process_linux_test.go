package riverjob_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent kills a child process if the test binary dies first.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
