package classify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/deadline"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// marker is put in every upstream message; no verdict may carry it.
const marker = "ECHO-OF-THE-PROMPT"

// checkVerdict holds for the verdict of any error.
func checkVerdict(t *testing.T, v classify.Verdict) {
	t.Helper()
	if v.Class == classify.OK || v.Class.String() == "invalid_class" {
		t.Fatalf("an error classified as %v: %+v", v.Class, v)
	}
	if v.RetryAfter < 0 || v.RetryAfter > classify.MaxRetryAfter {
		t.Fatalf("retry-after out of range: %v", v.RetryAfter)
	}
	if v.Status != "" && !isCanonical(v.Status) {
		t.Fatalf("status is not canonical: %q", v.Status)
	}
	s := v.String()
	if v.Reason == "" || len(v.Reason) > 64 || strings.Contains(s, marker) || !utf8.ValidString(s) {
		t.Fatalf("verdict carries upstream text: %q", s)
	}
}

// details decodes fuzz bytes as google.rpc details: JSON when it is, else a
// structure built from the bytes with every wrong type and depth the
// classifier must survive.
func details(b []byte) []map[string]any {
	var ds []map[string]any
	if json.Unmarshal(b, &ds) == nil {
		return ds
	}
	types := []any{"type.googleapis.com/google.rpc.RetryInfo", "type.googleapis.com/google.rpc.QuotaFailure",
		"type.googleapis.com/google.rpc.ErrorInfo", "google.rpc.Help", 7, nil}
	for i, c := range b {
		if i == 64 {
			break
		}
		var v any = string(b[i:])
		if c%2 == 0 {
			for range int(c) {
				v = []any{map[string]any{"x": v}}
			}
		}
		d := map[string]any{"@type": types[int(c)%len(types)]}
		switch c / 8 % 8 {
		case 0:
			d["retryDelay"] = string(b[i:])
		case 1:
			d["retryDelay"] = float64(c) * 1e300
		case 2:
			d["violations"] = []any{map[string]any{"quotaId": string(b[i:]), "quotaMetric": v}}
		case 3:
			d["violations"] = v
		case 4:
			d["reason"] = string(b[i:])
		case 5:
			d["reason"] = v
		case 6:
			d["metadata"] = v
		default:
			d = nil
		}
		ds = append(ds, d)
	}
	return ds
}

// FuzzFromFacts classifies arbitrary HTTP-shaped facts: any status code and
// status text, messages, details of any shape, delays of any size.
func FuzzFromFacts(f *testing.F) {
	f.Add(429, "RESOURCE_EXHAUSTED", "Please retry in 25.46s.", []byte(`[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]`), int64(0), "")
	f.Add(429, "", "", []byte(`[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel"}]}]`), int64(-1), "-5")
	f.Add(400, "INVALID_ARGUMENT", "API key not valid", []byte(`[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]`), int64(0), "")
	f.Add(0, "502 Bad Gateway", "", []byte("\x00\x09\x11\x19\x21\x29\x31\x39"), int64(1<<62), "1000000000")
	f.Add(0, "UNAV\xffAILABLE", "\xff\xfe", []byte(`[{"@type":5,"retryDelay":37},null,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1e308s"}]`), int64(0), "Sun, 29 Nov 2026 12:00:00 GMT")
	f.Add(-1, "OK", "retry in 9223372036.854775807s", []byte("[]"), int64(-1<<63), "99999999999999999999999")
	f.Add(1<<40, "\x00", strings.Repeat("token count exceeds ", 5000), []byte("\xff"), int64(1<<63-1), "1.5")
	f.Fuzz(func(t *testing.T, code int, status, message string, ds []byte, retryAfter int64, header string) {
		facts := classify.Facts{HTTPStatus: code, Status: status, Message: message + " " + marker,
			Details: details(ds), RetryAfter: time.Duration(retryAfter), RetryAfterHeader: header}
		v := classify.FromFacts(facts)
		checkVerdict(t, v)
		if code != 0 && v.HTTPStatus != code {
			t.Fatalf("status code %d reported as %d", code, v.HTTPStatus)
		}
		if v != classify.FromFacts(facts) && header == "" {
			t.Fatalf("not deterministic")
		}
		// As an error, through an *HTTPError.
		checkVerdict(t, classify.Classify(&classify.HTTPError{Facts: facts}))
	})
}

type statusError struct {
	code  int
	after time.Duration
	err   error
}

func (e *statusError) Error() string             { return "status " + fmt.Sprint(e.code) }
func (e *statusError) StatusCode() int           { return e.code }
func (e *statusError) RetryAfter() time.Duration { return e.after }
func (e *statusError) Unwrap() error             { return e.err }

// chain builds an error chain from fuzz bytes: wrapping, joining, verdicts,
// statuses, context, transport and library errors in any order.
func chain(ops []byte) error {
	leaves := []error{context.Canceled, context.DeadlineExceeded, io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET,
		syscall.ECONNREFUSED, syscall.EPIPE, errors.New("odd " + marker), deadline.ErrExhausted, nil}
	var err error = errors.New("upstream said " + marker)
	for i, op := range ops {
		if i == 256 {
			break
		}
		arg := int(op / 11)
		switch op % 11 {
		case 0:
			err = fmt.Errorf("wrap %s: %w", marker, err)
		case 1:
			err = errors.Join(err, leaves[arg%len(leaves)])
		case 2:
			err = classify.Wrap(err, classify.Verdict{Class: classify.Class(arg % len(classify.Classes())), HTTPStatus: arg * 7,
				RetryAfter: time.Duration(arg) * time.Second, Reason: "test"})
		case 3:
			err = &classify.HTTPError{Facts: classify.Facts{HTTPStatus: arg * 3, Message: marker, RetryAfterHeader: fmt.Sprint(arg * 1e7)}}
		case 4:
			err = &statusError{code: arg * 5, after: time.Duration(arg) * time.Hour * 1e3, err: err}
		case 5:
			err = &deadline.ExhaustedError{Remaining: time.Duration(arg), Cause: err}
		case 6:
			err = &retry.StoppedError{Attempts: arg, Reason: retry.StopReason(arg % 8), Last: err}
		case 7:
			err = &net.OpError{Op: "dial", Net: "tcp", Err: err}
		case 8:
			if l := leaves[arg%len(leaves)]; l != nil {
				err = l
			}
		case 9:
			err = &validate.Error{Rule: "x", Reason: "y", Err: err}
		default:
			err = fmt.Errorf("%w and %w", err, leaves[arg%len(leaves)])
		}
	}
	return err
}

// FuzzClassifyErrorChain classifies arbitrary error chains: the verdict of
// an error is always a failure, bounded, free of upstream text, and the
// same every time.
func FuzzClassifyErrorChain(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{2})                  // Wrap with a zero verdict
	f.Add([]byte{8, 19, 30, 0})       // context.Canceled, DeadlineExceeded...
	f.Add([]byte{3, 5, 6, 7, 9, 10})  // library errors around an HTTPError
	f.Add([]byte{4, 0, 15, 26, 37})   // StatusCode() with a huge RetryAfter
	f.Add([]byte("\xff\xfe\xfd\xfc")) // whatever that is
	f.Fuzz(func(t *testing.T, ops []byte) {
		err := chain(ops)
		v := classify.Classify(err)
		checkVerdict(t, v)
		if v != classify.Classify(err) {
			t.Fatalf("not deterministic")
		}
		_ = err.Error()
	})
}

// FuzzResponseHeaders reads responses with arbitrary Retry-After and
// Retry-After-Ms headers and bodies.
func FuzzResponseHeaders(f *testing.F) {
	f.Add(429, "37", "1500", []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`))
	f.Add(503, "1000000000", "1e308", []byte(""))
	f.Add(503, "", "NaN", []byte("<html>"))
	f.Add(429, "-5", "-1", []byte(`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-5s"}]}}`))
	f.Add(429, "Sun, 29 Nov 2126 12:00:00 GMT", "Inf", []byte(`{"error":null}`))
	f.Add(0, "\xff", "0x10", []byte("\xff"))
	f.Fuzz(func(t *testing.T, status int, retryAfter, retryAfterMs string, body []byte) {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retryAfter}, "Retry-After-Ms": {retryAfterMs}},
			Body: io.NopCloser(strings.NewReader(string(body) + marker))}
		he := classify.ReadResponse(context.Background(), resp)
		if he.Facts.RetryAfter < 0 || he.Facts.RetryAfter > classify.MaxRetryAfter {
			t.Fatalf("Retry-After-Ms %q read as %v", retryAfterMs, he.Facts.RetryAfter)
		}
		if s := he.Error(); strings.Contains(s, marker) || !utf8.ValidString(s) {
			t.Fatalf("error text carries the body: %q", s)
		}
		checkVerdict(t, classify.Classify(he))
	})
}
