package redisspend_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// childEnv marks this test binary re-run as a second process; it holds the
// Redis address.
const childEnv = "TIERGUARD_REDISSPEND_CHILD"

// shared is the server most tests use, each with a key prefix of its own.
var shared *redisserver.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	redis.SetLogger(quiet{})
	shared = redisserver.StartShared("redisspend")
	goleak.VerifyTestMain(redisserver.StopAfter(m, shared))
}

// quiet keeps go-redis from logging while the tests kill Redis.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func sharedAddr(t *testing.T) string {
	t.Helper()
	return redisserver.Need(t, shared).Addr
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
