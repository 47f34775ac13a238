package redisserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SkipEnv is the environment variable that opts out of the tests that need
// redis-server: set to anything, they skip; unset, a missing binary fails
// them.
const SkipEnv = "TIERGUARD_SKIP_REDIS"

// startTimeout bounds the wait for a new server's first answer: far more
// than a start takes, even on a loaded machine.
const startTimeout = 10 * time.Second

// Server is a redis-server process on a loopback port, without
// persistence.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1; Restart keeps it.
	Addr string

	port int
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Launch starts a server on a free loopback port and returns once it
// answers. The caller stops it; Start suits a server that lives as long as
// a test.
func Launch() (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	var err error
	for range 3 { // another process may take the free port before the server binds it
		var s *Server
		if s, err = launch(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func launch() (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "tierguard-redis-")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir}
	if err := s.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Start starts a server of the test's own, stopped when the test ends. It
// skips the test when SkipEnv is set, and fails it when the server does
// not start.
func Start(t testing.TB) *Server {
	t.Helper()
	Skip(t)
	s, err := Launch()
	if err != nil {
		t.Fatalf("redisserver: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartShared starts, from TestMain, the server a package's tests share;
// it returns nil when SkipEnv is set. When the server does not start, it
// says so on standard error, naming pkg, and exits with status 1: a run
// without Redis fails unless it opted out.
func StartShared(pkg string) *Server {
	if os.Getenv(SkipEnv) != "" {
		return nil
	}
	s, err := Launch()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: the tests need redis-server on PATH (apt-get install redis-server), or %s=1 to skip them: %v\n", pkg, SkipEnv, err)
		os.Exit(1)
	}
	return s
}

// StopAfter returns m with a Run that also stops s (when not nil) once the
// tests are done, so that goleak.VerifyTestMain, which looks for goroutines
// as soon as Run returns, does not find the one waiting for the server.
// It also gives go-redis's redial probes the time they take to see their
// client closed (see redialGrace).
func StopAfter(m *testing.M, s *Server) interface{ Run() int } {
	return stopAfter{m, s}
}

type stopAfter struct {
	m *testing.M
	s *Server
}

func (r stopAfter) Run() int {
	code := r.m.Run()
	if r.s != nil {
		r.s.Stop()
	}
	waitRedials(redialGrace)
	return code
}

// redialGrace bounds the wait for go-redis's redial probes. A client whose
// dials failed (a test that killed or paused its server) probes on a
// goroutine of its own that sleeps a second between dials and sees the
// client closed only when it wakes: for up to a second after Close, it is
// not a leak. One still there after redialGrace is, and goleak reports it.
const redialGrace = 3 * time.Second

// waitRedials waits, up to grace, until no go-redis redial probe is left.
func waitRedials(grace time.Duration) {
	deadline := time.Now().Add(grace)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("internal/pool.(*ConnPool).tryDial")) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Skip skips the test when SkipEnv is set.
func Skip(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipEnv) != "" {
		t.Skipf("%s is set", SkipEnv)
	}
}

// Need returns the shared server s to a test. It skips the test when
// SkipEnv is set, and fails it when s is nil: TestMain did not start it.
func Need(t testing.TB, s *Server) *Server {
	t.Helper()
	Skip(t)
	if s == nil {
		t.Fatal("redisserver: no shared server: TestMain must set it with StartShared")
	}
	return s
}

// UnusedAddr returns a loopback address nothing listens on: a port just
// released, for a server that cannot be reached.
func UnusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redisserver: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("redisserver: %v", err)
	}
	return addr
}

// LogPath is the file the server writes its log to, across restarts. Stop
// removes it.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// Restart starts the server again on its address, after killing it if it
// still runs: it comes back empty. It fails when another process took the
// port while the server was down.
func (s *Server) Restart() error {
	s.Kill()
	return s.start()
}

// start runs redis-server on the server's port and waits until this
// process, not another that took the port, answers.
func (s *Server) start() error {
	log, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = log, log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			out, _ := os.ReadFile(s.LogPath())
			return fmt.Errorf("redis-server exited: %s", out)
		default:
		}
		if pid, err := askPID(s.Addr); err == nil {
			if pid != cmd.Process.Pid {
				s.Kill()
				return fmt.Errorf("port %d is served by another redis-server (pid %d)", s.port, pid)
			}
			return nil
		}
	}
	s.Kill()
	return fmt.Errorf("redis-server did not answer on %s within %v", s.Addr, startTimeout)
}

// Kill stops the server at once (SIGKILL), cutting every connection to it,
// and returns when it is gone. Killing a server that is gone does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Freeze stops the server's process (SIGSTOP), as a server that hangs: its
// connections stay open, and commands wait unanswered until Thaw. It
// returns once the process is stopped: the signal is delivered
// asynchronously, and a command sent meanwhile could still be answered.
func (s *Server) Freeze() error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	return freeze(cmd.Process)
}

// Thaw resumes a frozen server (SIGCONT); it answers what waited.
func (s *Server) Thaw() error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	return thaw(cmd.Process)
}

// Stop kills the server and removes its directory. It may be called more
// than once.
func (s *Server) Stop() {
	s.Kill()
	_ = os.RemoveAll(s.dir)
}

// PID asks the server at Addr for its process id: after a restart, or when
// another process may hold the port, it tells which server answers.
func (s *Server) PID() (int, error) { return askPID(s.Addr) }

// askPID sends INFO server as an inline command and reads the reply's
// process_id line.
func askPID(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return 0, err
		}
		if msg, ok := strings.CutPrefix(line, "-"); ok {
			return 0, errors.New("redis: " + strings.TrimSpace(msg))
		}
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
}
