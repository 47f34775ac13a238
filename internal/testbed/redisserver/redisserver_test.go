package redisserver_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// conn is a connection to a server, sending inline commands and reading
// one-line replies (simple strings, errors, integers, and a nil bulk
// string's header).
type conn struct {
	net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &conn{c, bufio.NewReader(c)}
}

func (c *conn) send(t *testing.T, cmd string) {
	t.Helper()
	_, err := c.Write([]byte(cmd + "\r\n"))
	require.NoError(t, err)
}

// reply reads a reply, waiting for it at most wait.
func (c *conn) reply(wait time.Duration) (string, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	line, err := c.rd.ReadString('\n')
	return strings.TrimSuffix(line, "\r\n"), err
}

func (c *conn) do(t *testing.T, cmd string) string {
	t.Helper()
	c.send(t, cmd)
	r, err := c.reply(10 * time.Second)
	require.NoError(t, err, cmd)
	return r
}

// TestLifecycle follows one server through what the stores' tests put it
// through: a restart on the same address (empty, a new process), a freeze
// that holds a command unanswered until the thaw, a kill, and a restart
// after the kill.
func TestLifecycle(t *testing.T) {
	s := redisserver.Start(t)
	addr := s.Addr
	first, err := s.PID()
	require.NoError(t, err)
	assert.Equal(t, "+OK", dial(t, addr).do(t, "SET k v"))

	require.NoError(t, s.Restart())
	assert.Equal(t, addr, s.Addr, "the same address")
	second, err := s.PID()
	require.NoError(t, err)
	assert.NotEqual(t, first, second, "a new process")
	assert.Equal(t, "$-1", dial(t, addr).do(t, "GET k"), "no persistence: the restarted server is empty")

	c := dial(t, addr)
	assert.Equal(t, "+PONG", c.do(t, "PING"))
	require.NoError(t, s.Freeze())
	c.send(t, "PING")
	// A frozen process answers nothing, however long it is waited for:
	// the read deadline only bounds how long the test looks.
	_, err = c.reply(100 * time.Millisecond)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "no answer while frozen: %v", err)
	require.NoError(t, s.Thaw())
	r, err := c.reply(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, "+PONG", r, "the waiting command is answered after the thaw")

	s.Kill()
	_, err = c.reply(10 * time.Second)
	assert.Error(t, err, "the kill cut the connection")
	_, err = net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "nothing listens after the kill")
	s.Kill() // killing a dead server does nothing

	require.NoError(t, s.Restart())
	third, err := s.PID()
	require.NoError(t, err)
	assert.NotEqual(t, second, third)
	log, err := os.ReadFile(s.LogPath())
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(log), "Server initialized"), "the log holds every start:\n%s", log)

	s.Stop()
	s.Stop()
	_, err = os.Stat(s.LogPath())
	assert.ErrorIs(t, err, os.ErrNotExist, "Stop removes the directory")
	assert.Error(t, s.Restart(), "a stopped server stays stopped")
}

func TestServersAreApart(t *testing.T) {
	a, b := redisserver.Start(t), redisserver.Start(t)
	require.NotEqual(t, a.Addr, b.Addr)
	assert.Equal(t, "+OK", dial(t, a.Addr).do(t, "SET k v"))
	assert.Equal(t, "$-1", dial(t, b.Addr).do(t, "GET k"))
}

func TestUnusedAddr(t *testing.T) {
	_, err := net.DialTimeout("tcp", redisserver.UnusedAddr(t), time.Second)
	assert.Error(t, err)
}

func TestLaunchNeedsTheBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redisserver.Launch()
	assert.Error(t, err)
}

func TestSkipEnv(t *testing.T) {
	t.Setenv(redisserver.SkipEnv, "1")
	for name, start := range map[string]func(t *testing.T){
		"Start": func(t *testing.T) { redisserver.Start(t) },
		"Need":  func(t *testing.T) { redisserver.Need(t, nil) },
	} {
		var skipped bool
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			start(t)
		})
		assert.True(t, skipped, name)
	}
	assert.Nil(t, redisserver.StartShared("redisserver"), "no shared server")
}
