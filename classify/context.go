package classify

import (
	"context"
	"errors"
)

// InContext corrects a verdict made for one attempt with what the request's
// own context says. An attempt runs under a shorter per-try context, so a
// context.DeadlineExceeded from the attempt alone cannot tell a per-try
// timeout (Transient: another attempt or tier may fit) from the end of the
// whole budget (DeadlineExhausted). request is the caller's context, not the
// attempt's.
func InContext(request context.Context, v Verdict) Verdict {
	if err := request.Err(); err != nil {
		if errors.Is(err, context.Canceled) {
			return Verdict{Class: Canceled, Reason: "canceled by caller"}
		}
		return Verdict{Class: DeadlineExhausted, Reason: "deadline exceeded"}
	}
	switch v.Class {
	case DeadlineExhausted:
		return Verdict{Class: Transient, HTTPStatus: v.HTTPStatus, Status: v.Status, Reason: "per-try timeout"}
	case Canceled:
		// Something below the caller cancelled the attempt; the caller did
		// not ask for it, so this is not a reason to fail closed.
		return Verdict{Class: Unknown, Reason: "attempt canceled below the caller"}
	}
	return v
}
