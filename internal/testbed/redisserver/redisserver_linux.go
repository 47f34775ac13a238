package redisserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// dieWithParent has the kernel kill the server when the test binary dies
// first, so that a crashed or killed run leaves no server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func freeze(p *os.Process) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// /proc/PID/stat reads "PID (COMM) STATE ...", and COMM may hold
	// spaces and parentheses: the state follows the last ')'.
	path := "/proc/" + strconv.Itoa(p.Pid) + "/stat"
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		stat, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'T' {
			return nil
		}
	}
	return fmt.Errorf("redis-server (pid %d) did not stop within 5s of SIGSTOP", p.Pid)
}

func thaw(p *os.Process) error { return p.Signal(syscall.SIGCONT) }
