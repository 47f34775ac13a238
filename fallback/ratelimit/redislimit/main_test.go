package redislimit_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// skipEnv opts out of the tests that need a redis-server binary; without
// it, a missing binary fails the run.
const skipEnv = "TIERGUARD_SKIP_REDIS"

// shared is the server most tests use, each with its own key prefix.
var shared *server

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	if os.Getenv(skipEnv) == "" {
		s, err := startServer(0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redislimit: the tests need redis-server on PATH (apt-get install redis-server), or %s=1 to skip them: %v\n", skipEnv, err)
			os.Exit(1)
		}
		shared = s
	}
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// server is a redis-server process on a loopback port, started by the
// tests.
type server struct {
	port int
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startServer(port int) (*server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	dir, err := os.MkdirTemp("", "redislimit-test-")
	if err != nil {
		return nil, err
	}
	s := &server{port: port, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	return s, s.start()
}

// start runs redis-server (again, on the same port) and waits until it
// answers PING.
func (s *server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if c.Ping(context.Background()).Err() == nil {
			return nil
		}
	}
	s.kill()
	return fmt.Errorf("redis-server on %s did not answer", s.addr)
}

func (s *server) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
		s.cmd = nil
	}
}

// stop kills the server and removes its directory.
func (s *server) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

// pause stops the server's process (it keeps its connections, answering
// nothing), and resume lets it go on.
func (s *server) pause()  { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *server) resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// need fails the test when the shared server could not be started.
func need(t *testing.T) *server {
	t.Helper()
	if shared == nil {
		t.Skip(skipEnv + " is set")
	}
	return shared
}

var runs atomic.Int64

// prefix is a key prefix of the test's own.
func prefix(t *testing.T) string {
	return "tgtest:" + strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()) + ":" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatInt(runs.Add(1), 10) + ":"
}

// client is a client of its own (a separate "process"), closed with the
// test. Its timeouts are short, so that a test of a stopped server ends
// quickly whatever the store does.
func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requireEventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
}
