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

	"github.com/tierguard/tierguard/breaker/redisstore"
)

const (
	// skipEnv opts out of the tests that need a redis-server binary.
	// Without it, a missing binary fails the run.
	skipEnv = "TIERGUARD_SKIP_REDIS"
	// childEnv marks the test binary re-executed as a second process; it
	// holds the address of the Redis server to use.
	childEnv = "TIERGUARD_REDISSTORE_CHILD"
	// addrEnv tells the internal tests where the package's server is.
	addrEnv = "TIERGUARD_REDISSTORE_ADDR"
)

// sharedServer is the Redis server most tests use (each with its own key
// prefix); tests that kill or pause Redis start their own.
var sharedServer *server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	redis.SetLogger(quietLogger{})
	if os.Getenv(skipEnv) == "" {
		srv, err := startServer(0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "redisstore: the tests need redis-server on PATH (apt-get install redis-server), or %s=1 to skip them: %v\n", skipEnv, err)
			os.Exit(1)
		}
		sharedServer = srv
		// For the package's internal tests.
		_ = os.Setenv(addrEnv, srv.addr)
	}
	code := m.Run()
	if sharedServer != nil {
		sharedServer.stop()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// quietLogger keeps go-redis from logging reconnection attempts while the
// tests kill Redis on purpose.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// server is a redis-server process on a loopback port.
type server struct {
	port int
	addr string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// startServer starts a server on port, or on a free port when port is 0.
func startServer(port int) (*server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, err
	}
	if port != 0 {
		return startServerOn(port)
	}
	var err error
	for range 3 { // a free port may be taken before the server binds it
		var s *server
		if s, err = startServerOn(0); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func startServerOn(port int) (*server, error) {
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	dir, err := os.MkdirTemp("", "redisstore-test-")
	if err != nil {
		return nil, err
	}
	s := &server{port: port, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir}
	if err := s.start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// start runs redis-server (again, on the same port) and waits until it
// answers PING.
func (s *server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
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
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %s", out)
		default:
		}
		if pid, err := serverPID(s.addr); err == nil {
			if pid != cmd.Process.Pid {
				// Another server took the port between our probe and
				// this one's start.
				s.kill()
				return fmt.Errorf("port %d is served by another redis-server (pid %d)", s.port, pid)
			}
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.kill()
	return errors.New("redis-server did not answer within 10s")
}

// serverPID asks the server at addr for its process id, speaking RESP by
// hand so that waiting for the server starts no go-redis goroutine.
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
			return 0, fmt.Errorf("redis: %s", strings.TrimSpace(line))
		}
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
}

// kill stops the server abruptly (SIGKILL) and waits until it is gone.
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

// signal sends sig to the server: SIGSTOP freezes it (connections stay
// open, commands queue unanswered), and returns once it is frozen; SIGCONT
// resumes it.
func (s *server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	require.NoError(t, cmd.Process.Signal(sig))
	if sig == syscall.SIGSTOP {
		require.True(t, waitStopped(cmd.Process.Pid), "redis-server stopped")
	}
}

func (s *server) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// newServer starts a server of the test's own, stopped at the end.
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

// sharedAddr returns the address of the package's server.
func sharedAddr(t *testing.T) string {
	t.Helper()
	needRedis(t)
	require.NotNil(t, sharedServer)
	return sharedServer.addr
}

// redirect is a dial target a test can move, as a DNS name or a service
// address moves when Redis is replaced: clients made by redirectClient dial
// whatever address it holds.
type redirect struct{ addr atomic.Pointer[string] }

func (r *redirect) set(addr string) { r.addr.Store(&addr) }

// redirectClient returns a go-redis client that dials r's address, closed
// at the end of the test.
func redirectClient(t testing.TB, r *redirect) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "redirected", Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, *r.addr.Load())
	}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newClient returns a go-redis client closed at the end of the test.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var (
	prefixes sync.Map // testing.TB -> string
	runs     atomic.Int64
)

// prefix is a key prefix of the test's own, new for every run of it (with
// -count) so that no run sees the keys of another.
func prefix(t testing.TB) string {
	p, _ := prefixes.LoadOrStore(t, "tgtest:"+strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())+
		":"+strconv.Itoa(os.Getpid())+"."+strconv.FormatInt(runs.Add(1), 10)+":")
	return p.(string)
}

// newStore returns a store on its own client (a separate "process"),
// closed at the end of the test.
func newStore(t testing.TB, addr string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	return newStoreOn(t, newClient(t, addr), opts)
}

// newStoreOn returns a store on client c, closed at the end of the test.
func newStoreOn(t testing.TB, c redis.UniversalClient, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = prefix(t)
	}
	s, err := redisstore.New(c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// waitSubscribed waits until n stores listen on the channel, so that no
// publication is missed by a store still connecting.
func waitSubscribed(t *testing.T, addr, channel string, n int) {
	t.Helper()
	c := newClient(t, addr)
	require.Eventually(t, func() bool {
		m, err := c.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && m[channel] >= int64(n)
	}, 10*time.Second, 5*time.Millisecond, "stores subscribed")
}
