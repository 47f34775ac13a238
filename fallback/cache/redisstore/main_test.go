package redisstore_test

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

// childEnv marks the test binary run again as a second process; it holds
// the Redis address.
const childEnv = "TIERGUARD_CACHESTORE_CHILD"

// shared is the server most tests use, each with a key prefix of its own.
var shared *redisserver.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	redis.SetLogger(quiet{})
	shared = redisserver.StartShared("redisstore")
	goleak.VerifyTestMain(redisserver.StopAfter(m, shared))
}

// quiet keeps go-redis from logging the reconnections the tests cause.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func sharedAddr(t *testing.T) string {
	t.Helper()
	return redisserver.Need(t, shared).Addr
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
