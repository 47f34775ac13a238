package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The tests of this file start real programs from the Debian packages —
// Prometheus and Chromium — on loopback ports and temporary directories of
// their own, and stop them. A missing binary fails the test (.ci/run
// installs the packages); set the skip variable to run the rest without.
const (
	skipBrowserEnv    = "TIERGUARD_SKIP_BROWSER"
	skipPrometheusEnv = "TIERGUARD_SKIP_PROMETHEUS"
	// artifactsEnv names the directory the browser test keeps its
	// screenshot in; a temporary directory when unset.
	artifactsEnv = "TIERGUARD_ARTIFACTS"
)

// requireBinary returns the path of the first of names on PATH (or at an
// absolute path), failing the test when none is found unless skipEnv=1.
func requireBinary(t *testing.T, skipEnv string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s not found and %s=1", names[0], skipEnv)
	}
	t.Fatalf("%s not found on PATH: apt-get install %s (or %s=1 to skip)", names[0], names[0], skipEnv)
	return ""
}

// artifactsDir is where a test keeps what CI should archive.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(artifactsEnv)
	if dir == "" {
		return t.TempDir()
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(abs, 0o755))
	return abs
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// process is a program a test started, in its own process group so that
// stopping it stops its children too (Chromium's).
type process struct {
	cmd  *exec.Cmd
	done chan error
}

// startProcess starts cmd; the test's cleanup stops it.
func startProcess(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(p.stop)
	return p
}

// stop ends the process group: SIGTERM, then SIGKILL after 5s.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that outlived their parent.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// wait waits for the process to exit on its own, at most d.
func (p *process) wait(d time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		return fmt.Errorf("%s still running after %v", filepath.Base(p.cmd.Path), d)
	}
}

// syncWriter collects a process's output.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// poll calls f every interval until it returns nil or ctx ends.
func poll(ctx context.Context, interval time.Duration, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
