package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/breaker/redisstore"
)

// prefixEnv passes the key prefix to the child process.
const prefixEnv = "TIERGUARD_REDISSTORE_PREFIX"

// TestTwoProcesses runs a second OS process (this test binary again) that
// shares a breaker with this one through Redis: the child trips it and this
// process rejects; this process resets it and the child closes.
func TestTwoProcesses(t *testing.T) {
	if addr := os.Getenv(childEnv); addr != "" {
		child(t, addr, os.Getenv(prefixEnv))
		return
	}
	addr := sharedAddr(t)
	opts := redisstore.Options{Prefix: prefix(t), PollInterval: 200 * time.Millisecond}
	s := newStore(t, addr, opts)
	cfg := breaker.Config{Name: "gemini/pro", ConsecutiveFailures: 2, Cooldown: time.Minute}
	b, h := newBreaker(t, s, cfg)

	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestTwoProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+addr, prefixEnv+"="+opts.Prefix)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	expect := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "the child ended before saying %q", want)
				if strings.HasPrefix(l, "child: ") {
					if strings.TrimPrefix(l, "child: ") == want {
						return
					}
					t.Logf("%s", l)
				}
			case <-ctx.Done():
				t.Fatalf("the child did not say %q", want)
			}
		}
	}

	expect("tripped")
	require.Eventually(t, func() bool { return len(h.reasons()) == 1 }, 10*time.Second, time.Millisecond, "the child's trip reaches this process")
	require.Equal(t, breaker.Open, b.State())
	_, err = b.Allow()
	require.ErrorIs(t, err, breaker.ErrOpen)
	b.Reset()
	expect("closed")
	for range lines {
	}
	require.NoError(t, cmd.Wait(), "the child saw the reset")
	assert.Equal(t, []string{"closed->open (shared)", "open->closed (reset)"}, h.reasons())
}

// child is the second process: it joins, trips its breaker, then waits for
// the parent's reset.
func child(t *testing.T, addr, prefix string) {
	s := newStore(t, addr, redisstore.Options{Prefix: prefix, PollInterval: 200 * time.Millisecond})
	b, _ := newBreaker(t, s, breaker.Config{Name: "gemini/pro", ConsecutiveFailures: 2, Cooldown: time.Minute})
	waitSubscribed(t, addr, s.Channel(), 2)
	fail(t, b, 2)
	require.Equal(t, breaker.Open, b.State())
	fmt.Println("child: tripped")
	require.Eventually(t, state(b, breaker.Closed), 20*time.Second, time.Millisecond, "the parent's reset reaches the child")
	fmt.Println("child: closed")
}
