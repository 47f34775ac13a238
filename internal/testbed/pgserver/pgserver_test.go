package pgserver_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/pgserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartStop(t *testing.T) {
	s := pgserver.Start(t)
	require.Contains(t, s.DSN, "127.0.0.1:"+strconv.Itoa(s.Port))
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port))
	require.NoError(t, err, "the server listens")
	_ = c.Close()
	s.Stop()
	s.Stop()
	_, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.Port))
	require.Error(t, err, "the server no longer listens after Stop")
}
