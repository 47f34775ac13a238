package gemini

import (
	"errors"

	"google.golang.org/genai"
)

// Errors for 200 responses that carry no usable answer. Tier returns them
// wrapped with classify.Wrap, so they classify as InvalidOutput; errors.Is
// finds them.
var (
	// ErrNoCandidates: the response had no candidate and no prompt block.
	ErrNoCandidates = errors.New("gemini: response has no candidates")
	// ErrNoFinishReason: the candidate has no finish reason, so the answer
	// may be cut short.
	ErrNoFinishReason = errors.New("gemini: candidate has no finish reason")
	// ErrContinuation: the answer stopped with finish reason CONTINUATION
	// and the tier does not follow continuations (TierConfig.Continuation).
	ErrContinuation = errors.New("gemini: answer needs continuation")
)

// FinishError is a 200 whose candidate ended without a usable answer:
// RECITATION, MALFORMED_FUNCTION_CALL, OTHER and the like, or STOP or
// MAX_TOKENS with nothing in it. Tier returns it wrapped with classify.Wrap
// as an InvalidOutput, so the next tier answers; in a stream after content
// was shown, the chain reports it as the cause of an incomplete stream. Its
// text names only the enum value.
type FinishError struct {
	// FinishReason is the candidate's finish reason.
	FinishReason genai.FinishReason
}

// Error returns "gemini: answer unusable (RECITATION)".
func (e *FinishError) Error() string {
	return "gemini: answer unusable (" + enum(string(e.FinishReason)) + ")"
}

// BlockedError is a 200 whose prompt or answer a safety policy blocked.
// Tier returns it wrapped with classify.Wrap as a Safety failure, which the
// default class table fails closed: another model must not be asked to
// route around a policy decision. Its text names only the enum values,
// never the prompt or the safety ratings' text.
type BlockedError struct {
	// BlockReason is promptFeedback.blockReason when the prompt was
	// blocked; "" otherwise.
	BlockReason genai.BlockedReason
	// FinishReason is the candidate's finish reason when the answer was
	// stopped (SAFETY, PROHIBITED_CONTENT, BLOCKLIST, SPII, ...); ""
	// otherwise.
	FinishReason genai.FinishReason
}

// Error returns "gemini: prompt blocked (SAFETY)" or
// "gemini: answer blocked (PROHIBITED_CONTENT)".
func (e *BlockedError) Error() string {
	if e.BlockReason != "" {
		return "gemini: prompt blocked (" + enum(string(e.BlockReason)) + ")"
	}
	return "gemini: answer blocked (" + enum(string(e.FinishReason)) + ")"
}

// enum returns s if it looks like an enum value (upper-case letters and
// underscores, short), so that a hostile server cannot put text into error
// messages.
func enum(s string) string {
	if s == "" || len(s) > 40 {
		return "unrecognised"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'A' || c > 'Z') && c != '_' {
			return "unrecognised"
		}
	}
	return s
}
