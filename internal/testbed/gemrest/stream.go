package gemrest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/validate"
)

// Chunk is one event of a streamGenerateContent answer.
type Chunk struct {
	// Text is the text this chunk adds (the first candidate's parts, thought
	// parts left out); the answer is the concatenation of every chunk's.
	Text string
	// FinishReason is set on the chunk that ends the answer: "STOP",
	// "MAX_TOKENS", ... (never a safety reason: those are errors). A stream
	// that ends without one may be cut short; fallback.StreamChain reports
	// it as incomplete.
	FinishReason string
	// ModelVersion and ResponseID are as the server reports them.
	ModelVersion string
	ResponseID   string
	// Usage is the token usage so far, from the chunk's usageMetadata
	// (usually only on the last chunk); HasUsage reports that it had one.
	Usage    fallback.Usage
	HasUsage bool
}

var (
	_ fallback.StreamTier[Request, Chunk] = (*Client)(nil)
	_ fallback.StreamTier[string, Chunk]  = (*Tier[string])(nil)
)

// ErrNotEventStream is matched by the error for a 200 answer to a stream
// request whose Content-Type is neither text/event-stream nor absent: a
// proxy's page, or a server that ignored alt=sse. It classifies as
// classify.Transient, like a malformed unary body.
var ErrNotEventStream = errors.New("gemrest: answer is not an event stream")

// Stream makes one streamGenerateContent request for req (POST
// {BaseURL}/{APIVersion}/models/{model}:streamGenerateContent?alt=sse) when
// the sequence is ranged over, and yields its chunks. It makes *Client a
// fallback.StreamTier[Request, Chunk]. An error ends the sequence; see the
// package documentation ("Streaming") for how errors classify.
//
// The request honours ctx: when ctx ends, or when the consumer stops
// ranging, the response body is closed and the connection with it, so the
// server sees the request go away.
func (c *Client) Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if err := c.stream(ctx, req, yield); err != nil {
			yield(Chunk{}, err)
		}
	}
}

// Inspect describes a chunk to a fallback.StreamChain.
func (c *Client) Inspect(ch Chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: ch.Text, FinishReason: ch.FinishReason}
}

// stream yields the chunks of one request. It returns the error that ends
// the stream, or nil for a clean end or a consumer that stopped.
func (c *Client) stream(ctx context.Context, req Request, yield func(Chunk, error) bool) error {
	op := c.streamOp
	if strings.TrimSpace(req.Prompt) == "" {
		return classify.Wrap(errors.New(op+": empty prompt"),
			classify.Verdict{Class: classify.InvalidRequest, Reason: "empty prompt"})
	}
	body, err := json.Marshal(wireBody(req))
	if err != nil {
		return classify.Wrap(errors.New(op+": cannot encode the request"),
			classify.Verdict{Class: classify.InvalidRequest, Reason: "request not encodable"})
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.sseURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	c.auth(hreq)

	resp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	// Closing the body before its end closes the connection: the server
	// sees the request cancelled. The transport does it when ctx ends;
	// AfterFunc does it too, for a RoundTripper that would not.
	defer resp.Body.Close()
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		he := classify.ReadResponse(ctx, resp)
		return fmt.Errorf("%s: %w", op, he)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "text/event-stream" {
			return classify.Wrap(fmt.Errorf("%w (%s streamGenerateContent)", ErrNotEventStream, c.model),
				classify.Verdict{Class: classify.Transient, HTTPStatus: http.StatusOK, Reason: "malformed response body"})
		}
	}

	// The stream was billed: what its chunks said of it is reported once,
	// as it ends (usage comes with the last chunk).
	var rep fallback.Reply
	defer func() { fallback.Report(ctx, rep) }()
	events := newSSEReader(resp.Body, c.maxBytes)
	started := false
	for {
		data, err := events.next()
		switch {
		case errors.Is(err, io.EOF):
			// A clean end. Without a finish reason the chain calls the
			// stream incomplete.
			return nil
		case errors.Is(err, ErrResponseTooLarge):
			return fmt.Errorf("%s: %w", op, &validate.Error{
				Rule: "max_response_bytes", Reason: "stream event larger than " + strconv.FormatInt(c.maxBytes, 10) + " bytes",
				Err: ErrResponseTooLarge,
			})
		case err != nil:
			if ctx.Err() != nil {
				// The body was closed because ctx ended: say so, whatever
				// the read reported.
				err = ctx.Err()
			}
			// io.ErrUnexpectedEOF for a connection dropped mid-stream
			// (Transient), or the context's error.
			return fmt.Errorf("%s: reading stream: %w", op, err)
		}
		ch, ok, err := c.chunk(data)
		if err != nil {
			return err
		}
		if ch.HasUsage {
			rep.Usage, rep.HasUsage = ch.Usage, true
		}
		if ch.ResponseID != "" {
			rep.Response.ID = ch.ResponseID
		}
		if ch.ModelVersion != "" {
			rep.Response.Model = ch.ModelVersion
		}
		if ch.FinishReason != "" {
			rep.Response.FinishReason = ch.FinishReason
		}
		if !ok && !started {
			// A chunk without candidates before any with: nothing to
			// commit to.
			continue
		}
		started = true
		if !yield(ch, nil) {
			return nil
		}
	}
}

// wireEvent is one stream event: a GenerateContentResponse, or an error.
type wireEvent struct {
	wireResponse
	Error json.RawMessage `json:"error"`
}

// chunk decodes one event's data. ok is false for a chunk without
// candidates (usage only, say).
func (c *Client) chunk(data []byte) (ch Chunk, ok bool, err error) {
	op := c.streamOp
	var w wireEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return Chunk{}, false, malformed(op, err)
	}
	if len(w.Error) > 0 && !bytes.Equal(w.Error, []byte("null")) {
		// An error after the 200 header: classify it from its JSON, as if
		// it had been the response. Its message stays in the Facts.
		f, ok := classify.ParseErrorBody(data)
		if !ok || f.HTTPStatus == 0 && f.Status == "" {
			// No status to classify by: a broken event, as far as the
			// stream is concerned.
			return Chunk{}, false, malformed(op, errors.New("error event"))
		}
		return Chunk{}, false, fmt.Errorf("%s: error event in stream: %w", op, &classify.HTTPError{Facts: f})
	}
	if err := c.promptBlocked(&w.wireResponse); err != nil {
		return Chunk{}, false, err
	}
	ch = Chunk{ModelVersion: w.ModelVersion, ResponseID: w.ResponseID}
	ch.Usage, ch.HasUsage = w.usage()
	if len(w.Candidates) == 0 {
		return ch, false, nil
	}
	cand := &w.Candidates[0]
	if err := c.answerBlocked(cand); err != nil {
		return Chunk{}, false, err
	}
	ch.Text, ch.FinishReason = cand.text(), cand.FinishReason
	return ch, true, nil
}

// sseReader reads the data of server-sent events: lines ending in "\n" or
// "\r\n", "data:" fields (several in one event are joined with "\n"),
// events ending at a blank line. Comment lines (": keepalive") and other
// fields are skipped, as the SSE specification says. A line, and an event's
// data, may hold at most max bytes.
type sseReader struct {
	br   *bufio.Reader
	max  int64
	line []byte
	data []byte
}

func newSSEReader(r io.Reader, max int64) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 16<<10), max: max}
}

// next returns the next event's data, valid until the following call; it
// returns io.EOF at a clean end of the stream.
func (r *sseReader) next() ([]byte, error) {
	r.data = r.data[:0]
	has := false
	for {
		line, err := r.readLine()
		if errors.Is(err, io.EOF) && has {
			// The last event lacks its blank line; the body still ended
			// cleanly, so it is whole.
			return r.data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return r.data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue
		}
		value, _ = bytes.CutPrefix(value, []byte(" "))
		if int64(len(r.data)+len(value)+1) > r.max {
			return nil, ErrResponseTooLarge
		}
		if has {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		has = true
	}
}

// readLine returns the next line without its end, valid until the next
// call; io.EOF when the stream ended cleanly before a new line.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if int64(len(r.line)+len(frag)) > r.max+2 {
			return nil, ErrResponseTooLarge
		}
		switch {
		case err == nil:
			line := frag
			if len(r.line) > 0 {
				r.line = append(r.line, frag...)
				line = r.line
			}
			line = line[:len(line)-1]
			line, _ = bytes.CutSuffix(line, []byte("\r"))
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.line = append(r.line, frag...)
		case errors.Is(err, io.EOF) && len(r.line)+len(frag) > 0:
			// A last line without its end: keep it; the next call
			// reports io.EOF.
			r.line = append(r.line, frag...)
			line, _ := bytes.CutSuffix(r.line, []byte("\r"))
			return line, nil
		default:
			return nil, err
		}
	}
}
