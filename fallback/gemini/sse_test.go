package gemini_test

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/gemini"
)

// sseReference is what the filter promises, written the plain way over the
// whole stream: lines (each with its "\n", the last one maybe without) are
// kept, except comments and the event, id and retry fields, and except the
// blank line that ends an event of which no line was kept.
func sseReference(stream []byte) []byte {
	var out []byte
	kept := false
	for len(stream) > 0 {
		line := stream
		if i := bytes.IndexByte(stream, '\n'); i >= 0 {
			line = stream[:i+1]
		}
		stream = stream[len(line):]
		blank := bytes.Equal(line, []byte("\n")) || bytes.Equal(line, []byte("\r\n"))
		name, _, field := bytes.Cut(line, []byte(":"))
		switch {
		case blank:
			if kept {
				out = append(out, line...)
			}
			kept = false
		case len(line) > 0 && line[0] == ':',
			field && (string(name) == "event" || string(name) == "id" || string(name) == "retry"):
		default:
			out = append(out, line...)
			kept = true
		}
	}
	return out
}

// FuzzSSEFilter holds the filter to its reference on hostile streams —
// read a byte at a time from the body, into buffers of every size, with
// lines longer than the filter's own buffer — so that a keep-alive
// comment, an id or a retry field never reaches genai's reader, and
// nothing else is lost or reordered.
func FuzzSSEFilter(f *testing.F) {
	f.Add([]byte(": keepalive\r\n\r\ndata: {\"a\":1}\r\n\r\nid: 7\nretry: 1000\n\n: ping\n\ndata: x\n\n"), uint8(7))
	f.Add([]byte("event: message\ndata: y\n\n"), uint8(1))
	f.Add(append(append([]byte("data: "), bytes.Repeat([]byte("z"), 9000)...), "\n\n:"...), uint8(200))
	f.Add(append(append([]byte(": "), bytes.Repeat([]byte("c"), 5000)...), "\n\ndata: after\n\n"...), uint8(3))
	f.Add([]byte("data\ndata:\n\r\n\n\n:"), uint8(0))
	f.Fuzz(func(t *testing.T, stream []byte, size uint8) {
		filtered := gemini.SSEFilter(io.NopCloser(iotest.OneByteReader(bytes.NewReader(stream))))
		buf := make([]byte, int(size)+1)
		var got []byte
		for {
			n, err := filtered.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
		}
		require.Equal(t, string(sseReference(stream)), string(got))
		require.NoError(t, filtered.Close())
	})
}
