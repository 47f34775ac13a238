package redisstore_test

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// dieWithParent kills the server if the test binary dies first.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until process pid is stopped by a signal: SIGSTOP is
// delivered asynchronously, and a server may still run a command after
// the signal was sent.
func waitStopped(pid int) bool {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stat, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces, so read after the
		// last parenthesis.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'T' {
			return true
		}
	}
	return false
}
