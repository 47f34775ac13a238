//go:build !linux

package redisserver

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// dieWithParent does nothing: only Linux can tie a child's life to its
// parent's.
func dieWithParent(*exec.Cmd) {}

// freeze sends SIGSTOP with kill(1), which names signals the same on every
// Unix system (the syscall package has no SIGSTOP on Windows, where this
// fails). Without /proc there is no telling when the process has stopped:
// it is given a tenth of a second.
func freeze(p *os.Process) error {
	if err := kill("STOP", p); err != nil {
		return err
	}
	time.Sleep(100 * time.Millisecond)
	return nil
}

func thaw(p *os.Process) error { return kill("CONT", p) }

func kill(sig string, p *os.Process) error {
	if out, err := exec.Command("kill", "-"+sig, strconv.Itoa(p.Pid)).CombinedOutput(); err != nil {
		return fmt.Errorf("kill -%s %d: %v: %s", sig, p.Pid, err, out)
	}
	return nil
}
