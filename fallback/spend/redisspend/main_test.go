package redisspend_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const (
	// skipEnv opts out of the tests that need redis-server; without it a
	// missing binary fails the run.
	skipEnv = "TIERGUARD_SKIP_REDIS"
	// childEnv marks this test binary re-run as a second process; it
	// holds the Redis address.
	childEnv = "TIERGUARD_REDISSPEND_CHILD"
)

// shared is the server most tests use, each with a key prefix of its own.
var shared *server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	redis.SetLogger(quiet{})
	if os.Getenv(skipEnv) == "" {
		s, err := startServer(0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redisspend: the tests need redis-server on PATH (apt-get install redis-server), or %s=1 to skip them: %v\n", skipEnv, err)
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

// quiet keeps go-redis from logging while the tests kill Redis.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// server is a redis-server process on a loopback port, without
// persistence: killed and started again, it comes back empty.
type server struct {
	port int
	addr string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func startServer(port int) (*server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	var last error
	for range 3 { // a free port may be taken before the server binds it
		p := port
		if p == 0 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			p = l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
		}
		dir, err := os.MkdirTemp("", "redisspend-test-")
		if err != nil {
			return nil, err
		}
		s := &server{port: p, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), dir: dir}
		if last = s.start(); last == nil {
			return s, nil
		}
		_ = os.RemoveAll(dir)
		if port != 0 {
			break
		}
	}
	return nil, last
}

// start runs redis-server on the server's port and waits for its PING.
func (s *server) start() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = logf, logf
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
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %s", out)
		default:
		}
		if ping(s.addr) == nil {
			return nil
		}
	}
	s.kill()
	return errors.New("redis-server did not answer within 10s")
}

// ping speaks RESP by hand, so that waiting starts no go-redis goroutine.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "+PONG") {
		return fmt.Errorf("PING answered %q", buf[:n])
	}
	return nil
}

// kill stops the server with SIGKILL and waits until it is gone.
func (s *server) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

func (s *server) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

// newServer starts a server of the test's own, stopped at its end.
func newServer(t *testing.T) *server {
	t.Helper()
	needRedis(t)
	s, err := startServer(0)
	require.NoError(t, err)
	t.Cleanup(s.stop)
	return s
}

func needRedis(t *testing.T) {
	t.Helper()
	if os.Getenv(skipEnv) != "" {
		t.Skipf("%s is set", skipEnv)
	}
}

func sharedAddr(t *testing.T) string {
	t.Helper()
	needRedis(t)
	require.NotNil(t, shared)
	return shared.addr
}

// newClient is a client as the package documentation advises: context
// deadlines honoured, no retries of its own (the next exchange is the
// retry), short dial timeouts so that a dead server costs little.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// prefix is a key prefix of the test's own.
func prefix(t testing.TB) string {
	return "tgtest:" + strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()) + ":" + strconv.Itoa(os.Getpid()) + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}
