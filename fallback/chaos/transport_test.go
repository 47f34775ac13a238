package chaos_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/chaos"
)

// sseServer is an in-memory upstream: a stream request gets four
// server-sent events, 100ms apart (the last with finishReason STOP), any
// other request a JSON answer.
type sseServer struct{ requests int }

const unaryAnswer = `{"candidates":[{"content":{"parts":[{"text":"hello"}]},"finishReason":"STOP"}]}`

func (s *sseServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.requests++
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if !strings.Contains(req.URL.Path, "stream") {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(unaryAnswer)), Request: req}, nil
	}
	pr, pw := io.Pipe()
	go func() {
		for i := range 4 {
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case <-t.C:
			case <-req.Context().Done():
				pw.CloseWithError(req.Context().Err())
				return
			}
			finish := ""
			if i == 3 {
				finish = `,"finishReason":"STOP"`
			}
			if _, err := io.WriteString(pw, `data: {"candidates":[{"content":{"parts":[{"text":"`+string(rune('a'+i))+`"}]}`+finish+"}]}\r\n\r\n"); err != nil {
				return
			}
		}
		pw.Close()
	}()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: req}, nil
}

// events reads a response body as server-sent events: the data payloads
// and the comment lines, each with the time it arrived, and the error that
// ended it.
type event struct {
	data, comment string
	at            time.Duration
}

func readEvents(body io.Reader, t0 time.Time) (evs []event, err error) {
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			evs = append(evs, event{data: line[6:], at: time.Since(t0)})
		case strings.HasPrefix(line, ":"):
			evs = append(evs, event{comment: line, at: time.Since(t0)})
		}
	}
	return evs, sc.Err()
}

func do(t *testing.T, client *http.Client, ctx context.Context, path string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test"+path, strings.NewReader(`{"contents":[]}`))
	require.NoError(t, err)
	return client.Do(req)
}

// Each fault does to an HTTP exchange what a real server or network would.
func TestTransportFaults(t *testing.T) {
	const stream = "/v1beta/models/m:streamGenerateContent"
	for _, c := range []struct {
		name    string
		fault   chaos.Fault
		path    string
		timeout time.Duration
		check   func(t *testing.T, resp *http.Response, err error, t0 time.Time, upstream int)
	}{
		{"fail", chaos.Fail(chaos.GeminiRateLimited), stream, 0, func(t *testing.T, resp *http.Response, err error, _ time.Time, upstream int) {
			require.NoError(t, err)
			assert.Equal(t, 0, upstream, "no upstream request")
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, "429 Too Many Requests", resp.Status)
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, string(chaos.GeminiRateLimited.Body()), string(body))
			resp.Body = io.NopCloser(strings.NewReader(string(body)))
			v := classify.Classify(classify.ReadResponse(context.Background(), resp))
			assert.Equal(t, classify.RateLimited, v.Class)
			assert.Equal(t, 26*time.Second, v.RetryAfter)
		}},
		{"stall", chaos.Stall(), stream, 2 * time.Second, func(t *testing.T, _ *http.Response, err error, t0 time.Time, upstream int) {
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, 2*time.Second, time.Since(t0))
			assert.Equal(t, 0, upstream)
		}},
		{"latency", chaos.Latency(time.Second), "/unary", 0, func(t *testing.T, resp *http.Response, err error, t0 time.Time, upstream int) {
			require.NoError(t, err)
			assert.Equal(t, time.Second, time.Since(t0))
			body, _ := io.ReadAll(resp.Body)
			assert.Equal(t, unaryAnswer, string(body))
		}},
		{"cut after 2 events", chaos.CutAfter(2), stream, 0, func(t *testing.T, resp *http.Response, err error, t0 time.Time, _ int) {
			require.NoError(t, err)
			evs, err := readEvents(resp.Body, t0)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.ErrorIs(t, err, chaos.ErrInjected)
			require.Len(t, evs, 2)
			assert.Contains(t, evs[1].data, `"b"`)
			assert.Equal(t, classify.Transient, classify.Classify(err).Class)
		}},
		{"cut a unary body", chaos.CutAfter(1), "/unary", 0, func(t *testing.T, resp *http.Response, err error, _ time.Time, _ int) {
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Equal(t, unaryAnswer[:len(unaryAnswer)/2], string(body))
		}},
		{"cut before the response", chaos.CutAfter(0), stream, 0, func(t *testing.T, _ *http.Response, err error, _ time.Time, upstream int) {
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Equal(t, 0, upstream)
		}},
		{"idle gap after 2 events", chaos.IdleGap(2, 5*time.Second), stream, 0, func(t *testing.T, resp *http.Response, err error, t0 time.Time, _ int) {
			require.NoError(t, err)
			evs, err := readEvents(resp.Body, t0)
			require.NoError(t, err)
			require.Len(t, evs, 4)
			assert.Equal(t, 200*time.Millisecond, evs[1].at)
			assert.Equal(t, 5*time.Second+200*time.Millisecond, evs[2].at, "the third event after the gap (the upstream wrote it meanwhile)")
		}},
		{"idle gap past the context", chaos.IdleGap(1, 5*time.Second), stream, time.Second, func(t *testing.T, resp *http.Response, err error, t0 time.Time, _ int) {
			require.NoError(t, err)
			evs, err := readEvents(resp.Body, t0)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Len(t, evs, 1)
			assert.Equal(t, time.Second, time.Since(t0))
		}},
		{"idle gap before a unary body", chaos.IdleGap(0, time.Second), "/unary", 0, func(t *testing.T, resp *http.Response, err error, t0 time.Time, _ int) {
			require.NoError(t, err)
			_, _ = io.ReadAll(resp.Body)
			assert.Equal(t, time.Second, time.Since(t0))
		}},
		{"keepalive", chaos.Keepalive(), stream, 0, func(t *testing.T, resp *http.Response, err error, t0 time.Time, _ int) {
			require.NoError(t, err)
			evs, err := readEvents(resp.Body, t0)
			require.NoError(t, err)
			require.Len(t, evs, 8)
			for i, e := range evs {
				if i%2 == 0 {
					assert.Equal(t, ": keepalive", e.comment)
				} else {
					assert.NotEmpty(t, e.data)
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var sw chaos.Switch
				up := &sseServer{}
				client := &http.Client{Transport: chaos.Transport(up, &sw, "pro")}
				require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{{Fault: c.fault, Rate: 1, Tier: "pro"}}}))
				defer sw.Stop()
				ctx := context.Background()
				if c.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.timeout)
					defer cancel()
				}
				t0 := time.Now()
				resp, err := do(t, client, ctx, c.path)
				c.check(t, resp, err, t0, up.requests)
				if resp != nil {
					_ = resp.Body.Close()
				}
				// Let the fake's writer see the closed pipe and return.
				time.Sleep(time.Second)
			})
		})
	}
}

// Faults that need to understand an answer pass through a Transport,
// counted as unsupported; the switch off costs no allocation.
func TestTransportOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sw chaos.Switch
		resp := &http.Response{StatusCode: 200, Body: http.NoBody}
		rt := chaos.Transport(roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }), &sw, "pro")
		req, err := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
		require.NoError(t, err)
		assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = rt.RoundTrip(req) }))

		require.NoError(t, sw.Start(chaos.Drill{For: time.Hour, Rules: []chaos.Rule{
			{Fault: chaos.MalformedJSON(), Rate: 1}, {Fault: chaos.NoFinishReason(), Rate: 1}, {Fault: chaos.FinishReason("OTHER"), Rate: 1},
			{Fault: chaos.Fail(chaos.GeminiOverloaded), Rate: 1, Tier: "flash"},
		}}))
		defer sw.Stop()
		got, err := rt.RoundTrip(req)
		require.NoError(t, err)
		assert.Same(t, resp, got)
		for _, r := range sw.Status().Rules[:3] {
			assert.Equal(t, uint64(1), r.Unsupported, r.Fault)
		}
		assert.Panics(t, func() { chaos.Transport(nil, nil, "x") })
		assert.NotNil(t, chaos.Transport(nil, &sw, "x"))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
