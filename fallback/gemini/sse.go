package gemini

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"net/http"
)

// isEventStream reports whether resp is a server-sent event stream.
func isEventStream(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err == nil {
		return mt == "text/event-stream"
	}
	return resp.Request != nil && resp.Request.URL != nil && resp.Request.URL.Query().Get("alt") == "sse"
}

// sseFilter passes an event stream through, dropping the lines genai's
// stream reader cannot parse: comments (a line starting with ':') and the
// event, id and retry fields — and the blank line that ends an event made
// only of such lines, since genai splits the stream on blank lines and
// would read the leftover line break as the start of the next event. It
// keeps data lines and the blank lines that end their events, byte for
// byte, and reads lines of any length without buffering them whole.
type sseFilter struct {
	body      io.ReadCloser
	br        *bufio.Reader
	pending   []byte
	err       error
	midLine   bool // inside a line longer than the buffer
	skipping  bool // that line is being dropped
	eventKept bool // the current event has a line that was kept
}

func newSSEFilter(body io.ReadCloser) *sseFilter {
	return &sseFilter{body: body, br: bufio.NewReaderSize(body, 4<<10)}
}

// Read implements io.Reader.
func (f *sseFilter) Read(p []byte) (int, error) {
	for {
		if len(f.pending) > 0 {
			n := copy(p, f.pending)
			f.pending = f.pending[n:]
			return n, nil
		}
		if f.err != nil {
			return 0, f.err
		}
		line, err := f.br.ReadSlice('\n')
		if !f.midLine {
			switch {
			case blankLine(line):
				// The end of an event: kept only if the event was.
				f.skipping = !f.eventKept
				f.eventKept = false
			case ignorableLine(line):
				f.skipping = true
			default:
				f.skipping = false
				f.eventKept = true
			}
		}
		if !f.skipping {
			f.pending = line
		}
		f.midLine = err == bufio.ErrBufferFull
		if err != nil && err != bufio.ErrBufferFull {
			f.err = err
		}
	}
}

// Close closes the response body.
func (f *sseFilter) Close() error { return f.body.Close() }

// blankLine reports whether line is an empty line ("\n" or "\r\n").
func blankLine(line []byte) bool {
	return len(line) > 0 && (line[0] == '\n' || len(line) == 2 && line[0] == '\r' && line[1] == '\n')
}

// ignorableLine reports whether an SSE line is one genai cannot read and
// the specification lets a client skip: a comment, or a field other than
// data.
func ignorableLine(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	if line[0] == ':' {
		return true
	}
	name, _, found := bytes.Cut(line, []byte(":"))
	if !found {
		return false
	}
	switch string(name) {
	case "event", "id", "retry":
		return true
	}
	return false
}
