package redisstore_test

import (
	"bufio"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

const (
	// skipEnv opts out of the tests that need a redis-server binary;
	// without it a missing binary fails the run.
	skipEnv = "TIERGUARD_SKIP_REDIS"
	// childEnv marks the test binary run again as a second process; it
	// holds the Redis address.
	childEnv = "TIERGUARD_CACHESTORE_CHILD"
)

// shared is the server most tests use, each with a key prefix of its own.
var shared *server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	redis.SetLogger(quiet{})
	if os.Getenv(skipEnv) == "" {
		srv, err := startServer()
		if err != nil {
			fmt.Fprintf(os.Stderr, "redisstore: the tests need redis-server on PATH (apt-get install redis-server), or %s=1 to skip them: %v\n", skipEnv, err)
			os.Exit(1)
		}
		shared = srv
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

// quiet keeps go-redis from logging the reconnections the tests cause.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// server is a redis-server process on a loopback port.
type server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startServer() (*server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	var err error
	for range 3 { // a free port may be taken before the server binds it
		var s *server
		if s, err = startOnFreePort(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func startOnFreePort() (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "cachestore-test-")
	if err != nil {
		return nil, err
	}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		select {
		case <-s.done:
			out, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server exited: %s", out)
		default:
		}
		if pid, err := serverPID(s.addr); err == nil {
			if pid != s.cmd.Process.Pid {
				s.stop()
				return nil, fmt.Errorf("port %d is served by another redis-server", port)
			}
			return s, nil
		}
	}
	s.stop()
	return nil, errors.New("redis-server did not answer within 10s")
}

// serverPID asks the server for its process id over raw RESP, so that
// waiting for it starts no go-redis goroutine.
func serverPID(addr string) (int, error) {
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
		if strings.HasPrefix(line, "-") {
			return 0, errors.New(strings.TrimSpace(line))
		}
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	_ = os.RemoveAll(s.dir)
}

// freeze stops the server with SIGSTOP (connections stay open, commands
// go unanswered) until the test ends or thaw is called.
func (s *server) freeze(t *testing.T) (thaw func()) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGSTOP))
	var once sync.Once
	thaw = func() { once.Do(func() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(thaw)
	return thaw
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

func newServer(t *testing.T) *server {
	t.Helper()
	needRedis(t)
	s, err := startServer()
	require.NoError(t, err)
	t.Cleanup(s.stop)
	return s
}

func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var runs atomic.Int64

// prefix is a key prefix of the test's own, new for every run.
func prefix(t testing.TB) string {
	return "tgtest:" + strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()) + ":" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatInt(runs.Add(1), 10) + ":"
}

// waitSubscribed waits until n stores listen on the channel.
func waitSubscribed(t *testing.T, addr, channel string, n int) {
	t.Helper()
	c := newClient(t, addr)
	require.Eventually(t, func() bool {
		m, err := c.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && m[channel] >= int64(n)
	}, 10*time.Second, 5*time.Millisecond, "stores subscribed")
}
