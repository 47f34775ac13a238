package redislimit_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// shared is the server most tests use, each with its own key prefix.
var shared *redisserver.Server

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	shared = redisserver.StartShared("redislimit")
	goleak.VerifyTestMain(redisserver.StopAfter(m, shared))
}

// quiet keeps go-redis from logging the reconnections the tests cause.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

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
