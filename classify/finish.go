package classify

import "strings"

// FinishReason classifies how a 200 answer ended, from its finish reason —
// Gemini's FinishReason enum ("STOP", "MAX_TOKENS", "RECITATION", ...),
// OpenAI's finish_reason ("stop", "length", "content_filter", ...) or
// Anthropic's stop_reason ("end_turn", "max_tokens", "refusal", ...),
// matched without regard to case — and whether it carried anything usable
// (hasContent: non-blank text, a function call, an image). Class OK means
// the answer stands; any other verdict is the failure the 200 really is:
//
//	STOP, stop, tool_calls, function_call,
//	end_turn, stop_sequence, tool_use       OK with content; InvalidOutput when empty
//	MAX_TOKENS, length, max_tokens          OK with content (a cut answer: validate it);
//	                                        InvalidOutput when empty (the budget, often
//	                                        the thinking budget, used it all)
//	SAFETY, PROHIBITED_CONTENT, BLOCKLIST,
//	SPII, IMAGE_SAFETY,
//	IMAGE_PROHIBITED_CONTENT, content_filter,
//	refusal                                 Safety: a policy decision, never routed around
//	RECITATION, IMAGE_RECITATION            InvalidOutput: the answer was withheld as a
//	                                        possible recitation; another model may answer
//	MALFORMED_FUNCTION_CALL,
//	UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS  InvalidOutput: the transport was healthy,
//	                                        the output unusable
//	LANGUAGE, OTHER, IMAGE_OTHER, NO_IMAGE  InvalidOutput
//	CONTINUATION, pause_turn                InvalidOutput: the answer needs further
//	                                        requests the caller did not ask for
//	                                        (Anthropic pauses a long server-tool turn
//	                                        with pause_turn; the turn goes on only
//	                                        when the caller sends it back)
//	"", FINISH_REASON_UNSPECIFIED, null     InvalidOutput: the answer may be cut short
//	anything else                           OK with content, InvalidOutput when empty
//
// The Reason names the finish reason's meaning, never the answer.
func FinishReason(reason string, hasContent bool) Verdict {
	switch strings.ToUpper(reason) {
	case "STOP", "TOOL_CALLS", "FUNCTION_CALL", "END_TURN", "STOP_SEQUENCE", "TOOL_USE":
		if hasContent {
			return Verdict{Class: OK}
		}
		return Verdict{Class: InvalidOutput, Reason: "empty answer"}
	case "MAX_TOKENS", "LENGTH":
		if hasContent {
			return Verdict{Class: OK}
		}
		return Verdict{Class: InvalidOutput, Reason: "output token limit reached before any answer"}
	case "SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "CONTENT_FILTER":
		return Verdict{Class: Safety, Reason: "answer blocked by a safety policy"}
	case "REFUSAL":
		return Verdict{Class: Safety, Reason: "model refused"}
	case "RECITATION", "IMAGE_RECITATION":
		return Verdict{Class: InvalidOutput, Reason: "answer withheld as recitation"}
	case "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS":
		return Verdict{Class: InvalidOutput, Reason: "malformed tool call"}
	case "LANGUAGE":
		return Verdict{Class: InvalidOutput, Reason: "unsupported language"}
	case "OTHER", "IMAGE_OTHER", "NO_IMAGE":
		return Verdict{Class: InvalidOutput, Reason: "answer stopped for another reason"}
	case "CONTINUATION", "PAUSE_TURN":
		return Verdict{Class: InvalidOutput, Reason: "answer needs continuation"}
	case "", "FINISH_REASON_UNSPECIFIED", "NULL":
		return Verdict{Class: InvalidOutput, Reason: "no finish reason"}
	}
	if hasContent {
		return Verdict{Class: OK}
	}
	return Verdict{Class: InvalidOutput, Reason: "empty answer"}
}

// BlockReason classifies a 200 whose prompt was blocked (Gemini's
// promptFeedback.blockReason: SAFETY, OTHER, BLOCKLIST, PROHIBITED_CONTENT,
// IMAGE_SAFETY, MODEL_ARMOR, JAILBREAK, ...). Every block is Safety: a
// policy decision about the request, which another model must not be asked
// to route around. An empty or unspecified reason is no block (class OK).
func BlockReason(reason string) Verdict {
	switch reason {
	case "", "BLOCKED_REASON_UNSPECIFIED":
		return Verdict{Class: OK}
	}
	return Verdict{Class: Safety, Reason: "prompt blocked by a safety policy"}
}
