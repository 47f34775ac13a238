package chaos

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/tierguard/tierguard/internal/budget"
)

// Transport wraps rt (nil: http.DefaultTransport) so that drills on sw
// inject faults into the HTTP requests of a client — an SDK's client (genai,
// openai-go) or your own — as rules with Tier set to tier, or with no Tier,
// match them. The client then meets the faults as it would meet the real
// ones: error responses arrive as their real bytes and the SDK builds its
// own error from them (and its classifier rule classifies that), cuts and
// idle gaps happen between server-sent events, Keepalive adds SSE comment
// lines. While sw is off a request costs one atomic load more and
// allocates nothing more.
//
// Faults that need to understand an answer (Answer, FinishReason,
// NoFinishReason) do not apply here; wrap the tier instead.
func Transport(rt http.RoundTripper, sw *Switch, tier string) http.RoundTripper {
	if sw == nil {
		panic("chaos: Transport with a nil *Switch")
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{rt: rt, sw: sw, tier: tier}
}

type transport struct {
	rt   http.RoundTripper
	sw   *Switch
	tier string
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.sw.cur.Load()
	if r == nil {
		return t.rt.RoundTrip(req)
	}
	return t.inject(req, r)
}

func (t *transport) inject(req *http.Request, r *running) (*http.Response, error) {
	ctx := req.Context()
	f, u, ok := t.sw.pick(ctx, r, t.tier, atTransport)
	if !ok {
		return t.rt.RoundTrip(req)
	}
	// A RoundTripper must close the request's body, also when it sends
	// nothing.
	closeBody := func() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
	}
	if err := budget.Sleep(ctx, f.delay(u)); err != nil {
		closeBody()
		return nil, ctxErr(f, err)
	}
	switch f.kind {
	case kindStall:
		closeBody()
		<-ctx.Done()
		return nil, ctxErr(f, ctx.Err())
	case kindFail:
		closeBody()
		return f.resp.resp.http(req), nil
	case kindCut:
		if f.chunks == 0 {
			closeBody()
			return nil, f.err()
		}
	case kindGap:
		if f.chunks == 0 {
			if err := budget.Sleep(ctx, f.gap); err != nil {
				closeBody()
				return nil, ctxErr(f, err)
			}
			return t.rt.RoundTrip(req)
		}
	case kindLatency:
		return t.rt.RoundTrip(req)
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if !eventStream(resp.Header.Get("Content-Type")) {
		switch f.kind {
		case kindCut:
			resp.Body = &halfBody{body: resp.Body, f: f}
		case kindGap:
			resp.Body = &gapBody{ReadCloser: resp.Body, ctx: ctx, f: f}
		}
		return resp, nil
	}
	resp.Body = &sseBody{src: bufio.NewReader(resp.Body), body: resp.Body, ctx: ctx, f: f}
	return resp, nil
}

// http builds the response a server would have sent for req.
func (r Response) http(req *http.Request) *http.Response {
	h := r.Header()
	h.Set("Content-Length", strconv.Itoa(len(r.body)))
	return &http.Response{
		Status:     strconv.Itoa(r.status) + " " + http.StatusText(r.status),
		StatusCode: r.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: req,
	}
}

func eventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// sseBody relays an event stream event by event, applying a fault at the
// event it concerns.
type sseBody struct {
	src  *bufio.Reader
	body io.Closer
	ctx  context.Context
	f    Fault

	mu     sync.Mutex
	buf    bytes.Buffer
	events int
	err    error
}

const keepaliveLine = ": keepalive\n\n"

func (b *sseBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && b.err == nil {
		b.next()
	}
	if b.buf.Len() > 0 {
		return b.buf.Read(p)
	}
	return 0, b.err
}

// next reads one event into buf, or sets err.
func (b *sseBody) next() {
	switch {
	case b.f.kind == kindCut && b.events == b.f.chunks:
		b.err = b.f.err()
		return
	case b.f.kind == kindGap && b.events == b.f.chunks && b.events > 0:
		if err := budget.Sleep(b.ctx, b.f.gap); err != nil {
			b.err = ctxErr(b.f, err)
			return
		}
	}
	var event bytes.Buffer
	for {
		line, err := b.src.ReadSlice('\n')
		event.Write(line)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if event.Len() > 0 {
				b.emit(event.Bytes())
			}
			b.err = err
			return
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 && event.Len() > len(line) {
			b.emit(event.Bytes())
			return
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			// A blank line with no event before it: pass it on.
			b.buf.Write(line)
			event.Reset()
			return
		}
	}
}

// emit queues an event. Blocks of comment lines only (a server's own
// keepalives) pass through without counting as events.
func (b *sseBody) emit(event []byte) {
	if !commentOnly(event) {
		if b.f.kind == kindKeepalive {
			b.buf.WriteString(keepaliveLine)
		}
		b.events++
	}
	b.buf.Write(event)
}

func commentOnly(event []byte) bool {
	for line := range bytes.Lines(event) {
		if l := bytes.TrimRight(line, "\r\n"); len(l) > 0 && l[0] != ':' {
			return false
		}
	}
	return true
}

func (b *sseBody) Close() error { return b.body.Close() }

// halfBody passes half of a body that is not an event stream, then fails
// as a dropped connection does.
type halfBody struct {
	body io.ReadCloser
	f    Fault
	once sync.Once
	rest *bytes.Reader
	err  error
}

func (b *halfBody) Read(p []byte) (int, error) {
	b.once.Do(func() {
		data, err := io.ReadAll(io.LimitReader(b.body, 1<<26))
		if err != nil {
			b.err = err
			return
		}
		b.rest = bytes.NewReader(data[:len(data)/2])
	})
	if b.rest == nil {
		return 0, b.err
	}
	n, err := b.rest.Read(p)
	if err == io.EOF {
		err = b.f.err()
	}
	return n, err
}

func (b *halfBody) Close() error { return b.body.Close() }

// gapBody waits before the first byte of a body that is not an event
// stream.
type gapBody struct {
	io.ReadCloser
	ctx    context.Context
	f      Fault
	waited bool
}

func (b *gapBody) Read(p []byte) (int, error) {
	if !b.waited {
		b.waited = true
		if err := budget.Sleep(b.ctx, b.f.gap); err != nil {
			return 0, ctxErr(b.f, err)
		}
	}
	return b.ReadCloser.Read(p)
}
