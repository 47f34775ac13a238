package main

import (
	"net/http"
	"strings"
	"sync"

	"github.com/tierguard/tierguard/breaker"
)

// callCounter sits between the tiers and the fake server's connections and
// counts every generation request on the client side. The workers count a
// call when the chain makes it, the server when its handler has read the
// request: a request cut in between (its attempt's deadline, a cancel, a
// dropped connection), which a loaded machine makes more likely, is the
// workers' alone. What is cut here is what the two may differ by.
type callCounter struct {
	next http.RoundTripper
	// breakers are the tiers' breakers by model, set before the first
	// request and only read after it.
	breakers map[string]*breaker.Breaker

	mu    sync.Mutex
	calls clientCalls
}

// clientCalls is what the tiers' requests came to, as the client saw them.
type clientCalls struct {
	// Sent counts the generation requests the tiers sent, Cut those that
	// ended without a response (the server may or may not have read them).
	Sent, Cut int
	// Closed503 counts the 503 answers to requests sent while the tier's
	// breaker was closed (or while the tier had none): the outage's calls
	// that no breaker stood in front of. Probe503 counts those sent while
	// it was open or half-open: its probes, and the second try of a stage
	// the breaker had let in before it opened.
	Closed503, Probe503 int
}

func newCallCounter(next http.RoundTripper) *callCounter {
	return &callCounter{next: next, breakers: map[string]*breaker.Breaker{}}
}

// RoundTrip counts req if it asks a model for an answer, and sends it on.
func (c *callCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	model, ok := generationModel(req.URL.Path)
	if !ok {
		return c.next.RoundTrip(req)
	}
	closed := true
	if b := c.breakers[model]; b != nil {
		closed = b.State() == breaker.Closed
	}
	resp, err := c.next.RoundTrip(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls.Sent++
	switch {
	case err != nil:
		c.calls.Cut++
	case resp.StatusCode == http.StatusServiceUnavailable && closed:
		c.calls.Closed503++
	case resp.StatusCode == http.StatusServiceUnavailable:
		c.calls.Probe503++
	}
	return resp, err
}

// snapshot returns the counts so far.
func (c *callCounter) snapshot() clientCalls {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// generationModel returns the model a generateContent path names.
func generationModel(path string) (string, bool) {
	_, rest, ok := strings.Cut(path, "/models/")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, ":generateContent")
}
