package redisspend_test

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxy forwards TCP connections to a Redis server and loses replies:
// every dropEvery-th reply to a script (EVALSHA, EVAL) is read and thrown
// away, and the client's connection closed. The server has run the
// commands; the client sees an error and does not know it — the case a
// retried write must survive. Other replies (a new connection's HELLO)
// pass, so that every retry can get through.
type proxy struct {
	ln        net.Listener
	target    string
	dropEvery int64

	replies atomic.Int64
	dropped atomic.Int64

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newProxy(t testing.TB, target string, dropEvery int64) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, dropEvery: dropEvery}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		var script atomic.Bool
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer s.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if bytes.Contains(bytes.ToUpper(buf[:n]), []byte("EVAL")) {
						script.Store(true)
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer p.wg.Done()
			p.replyLoop(c, s, &script)
		}()
	}
}

// replyLoop forwards the server's replies, losing some of those to
// scripts.
func (p *proxy) replyLoop(c, s net.Conn, script *atomic.Bool) {
	defer c.Close()
	defer s.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if script.Swap(false) {
				if k := p.replies.Add(1); p.dropEvery > 0 && k%p.dropEvery == 0 {
					p.dropped.Add(1)
					return
				}
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
