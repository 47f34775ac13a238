package fakegemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Defaults of [Params].
const (
	// DefaultRetryDelay is the wait a 429 advertises.
	DefaultRetryDelay = 37380 * time.Millisecond
	// DefaultTokenLimit is the context window named by TokenLimit errors.
	DefaultTokenLimit = 1048576
	// DefaultBodySize is the size of HugeBody's body, 10 MiB.
	DefaultBodySize = 10 << 20
)

const (
	jsonContentType = "application/json; charset=UTF-8"
	quotaMetric     = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
	perMinuteQuota  = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
	perDayQuota     = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
	typePrefix      = "type.googleapis.com/google.rpc."
)

// Gemini's REST error envelope. Field order follows the real API.
type gemError struct {
	Error gemErrorBody `json:"error"`
}

type gemErrorBody struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []any  `json:"details,omitempty"`
}

type quotaFailure struct {
	Type       string           `json:"@type"`
	Violations []quotaViolation `json:"violations"`
}

type quotaViolation struct {
	QuotaMetric     string            `json:"quotaMetric"`
	QuotaID         string            `json:"quotaId"`
	QuotaDimensions map[string]string `json:"quotaDimensions"`
	QuotaValue      string            `json:"quotaValue"`
}

type helpLinks struct {
	Type  string     `json:"@type"`
	Links []helpLink `json:"links"`
}

type helpLink struct {
	Description string `json:"description"`
	URL         string `json:"url"`
}

type retryInfo struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
}

type errorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata"`
}

type localizedMessage struct {
	Type    string `json:"@type"`
	Locale  string `json:"locale"`
	Message string `json:"message"`
}

// withDefaults fills in the zero fields of p.
func (p Params) withDefaults(k Kind) Params {
	if p.Model == "" {
		p.Model = "gemini-2.5-flash"
	}
	if p.APIVersion == "" {
		p.APIVersion = "v1beta"
	}
	if p.Method == "" {
		p.Method = "generateContent"
	}
	if p.RetryDelay <= 0 {
		p.RetryDelay = DefaultRetryDelay
	}
	if p.QuotaValue == "" {
		p.QuotaValue = "10"
		if k == QuotaExhausted {
			p.QuotaValue = "250"
		}
	}
	if p.TokenLimit <= 0 {
		p.TokenLimit = DefaultTokenLimit
	}
	if p.InputTokens <= 0 {
		p.InputTokens = p.TokenLimit + 1
	}
	if p.BodySize <= 0 {
		p.BodySize = DefaultBodySize
	}
	if p.CutAfter <= 0 {
		p.CutAfter = 1
	}
	if p.Text == "" {
		p.Text = `{"answer": "this JSON is cut off`
	}
	if p.Status == 0 {
		p.Status = k.HTTPStatus()
	}
	return p
}

// protoDuration formats d the way the real API fills RetryInfo.retryDelay:
// whole seconds, truncated, from one second up; below one second the exact
// value in protobuf-JSON form (three, six or nine fractional digits).
func protoDuration(d time.Duration) string {
	if d >= time.Second {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	switch {
	case d%time.Millisecond == 0:
		return fmt.Sprintf("0.%03ds", d/time.Millisecond)
	case d%time.Microsecond == 0:
		return fmt.Sprintf("0.%06ds", d/time.Microsecond)
	default:
		return fmt.Sprintf("0.%09ds", d)
	}
}

// secondsText formats d in seconds with no trailing zeros: 37.38.
func secondsText(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// NotFoundMessage is the real API's message for a generation request to a
// retired or unknown model, e.g. "models/gemini-1.5-pro is not found for API
// version v1beta, or is not supported for generateContent. Call ListModels
// to see the list of available models and their supported methods."
func NotFoundMessage(model, apiVersion, method string) string {
	return "models/" + model + " is not found for API version " + apiVersion +
		", or is not supported for " + method +
		". Call ListModels to see the list of available models and their supported methods."
}

const apiKeyInvalidMessage = "API key not valid. Please pass a valid API key."

// gemErrorOf builds the Gemini error envelope of k. It is only called for
// kinds whose body is a well-formed Gemini error.
func gemErrorOf(k Kind, p Params) gemErrorBody {
	b := gemErrorBody{Code: p.Status}
	switch k {
	case Unavailable:
		b.Status, b.Message = "UNAVAILABLE", "The model is overloaded. Please try again later."
	case Internal:
		b.Status, b.Message = "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	case DeadlineExceeded:
		b.Status, b.Message = "DEADLINE_EXCEEDED", "Deadline expired before operation could complete."
	case RateLimited, QuotaExhausted:
		if k == RateLimited && p.NoQuota {
			b.Status, b.Message = "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."
			break
		}
		quotaID := perMinuteQuota
		if k == QuotaExhausted {
			quotaID = perDayQuota
		}
		b.Status = "RESOURCE_EXHAUSTED"
		b.Message = "You exceeded your current quota, please check your plan and billing details. " +
			"For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. " +
			"To monitor your current usage, head to: https://ai.dev/rate-limit. \n" +
			"* Quota exceeded for metric: " + quotaMetric + ", limit: " + p.QuotaValue + ", model: " + p.Model +
			"\nPlease retry in " + secondsText(p.RetryDelay) + "s."
		b.Details = []any{
			quotaFailure{Type: typePrefix + "QuotaFailure", Violations: []quotaViolation{{
				QuotaMetric:     quotaMetric,
				QuotaID:         quotaID,
				QuotaDimensions: map[string]string{"location": "global", "model": p.Model},
				QuotaValue:      p.QuotaValue,
			}}},
			helpLinks{Type: typePrefix + "Help", Links: []helpLink{{
				Description: "Learn more about Gemini API quotas",
				URL:         "https://ai.google.dev/gemini-api/docs/rate-limits",
			}}},
			retryInfo{Type: typePrefix + "RetryInfo", RetryDelay: protoDuration(p.RetryDelay)},
		}
	case Retired:
		b.Status, b.Message = "NOT_FOUND", NotFoundMessage(p.Model, p.APIVersion, p.Method)
	case TokenLimit:
		b.Status = "INVALID_ARGUMENT"
		b.Message = fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", p.InputTokens, p.TokenLimit)
	case BadRequest:
		b.Status, b.Message = "INVALID_ARGUMENT", "Request contains an invalid argument."
	case InvalidAPIKey:
		b.Status, b.Message = "INVALID_ARGUMENT", apiKeyInvalidMessage
		b.Details = []any{
			errorInfo{Type: typePrefix + "ErrorInfo", Reason: "API_KEY_INVALID", Domain: "googleapis.com",
				Metadata: map[string]string{"service": "generativelanguage.googleapis.com"}},
			localizedMessage{Type: typePrefix + "LocalizedMessage", Locale: "en-US", Message: apiKeyInvalidMessage},
		}
	case Unauthenticated:
		b.Status = "UNAUTHENTICATED"
		b.Message = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
		b.Details = []any{errorInfo{Type: typePrefix + "ErrorInfo", Reason: "ACCESS_TOKEN_TYPE_UNSUPPORTED", Domain: "googleapis.com",
			Metadata: map[string]string{
				"method":  "google.ai.generativelanguage." + p.APIVersion + ".GenerativeService." + upperFirst(p.Method),
				"service": "generativelanguage.googleapis.com",
			}}}
	case PermissionDenied:
		b.Status, b.Message = "PERMISSION_DENIED", "The caller does not have permission"
	case NoCodeJSON:
		b.Code = 0
		b.Status, b.Message = "INTERNAL", "Internal error encountered."
	case HugeBody:
		b.Status = "INTERNAL"
	}
	if p.Message != "" && k != HugeBody {
		b.Message = p.Message
	}
	return b
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// badGatewayPage is a Google front-end style 502 page.
const badGatewayPage = `<!DOCTYPE html>
<html lang=en>
  <meta charset=utf-8>
  <meta name=viewport content="initial-scale=1, minimum-scale=1, width=device-width">
  <title>Error 502 (Server Error)!!1</title>
  <style>
    *{margin:0;padding:0}html,code{font:15px/22px arial,sans-serif}html{background:#fff;color:#222;padding:15px}body{margin:7% auto 0;max-width:390px;min-height:180px;padding:30px 0 15px}p{margin:11px 0 22px;overflow:hidden}ins{color:#777;text-decoration:none}
  </style>
  <a href=//www.google.com/><span id=logo aria-label=Google></span></a>
  <p><b>502.</b> <ins>That’s an error.</ins>
  <p>The server encountered a temporary error and could not complete your request.<p>Please try again in 30 seconds.  <ins>That’s all we know.</ins>
`

// ErrorResponse returns the status, headers and body that the Gemini
// endpoints write for the error kind k (one of [ErrorKinds]), with p's zero
// fields at their defaults. The body is byte for byte what the server
// sends. For a kind that is not an error it returns 0, nil, nil.
func ErrorResponse(k Kind, p Params) (status int, header http.Header, body []byte) {
	if !k.isError() {
		return 0, nil, nil
	}
	var buf bytes.Buffer
	status, header = writeGemError(&buf, k, p)
	return status, header, buf.Bytes()
}

// writeGemError writes the body of error kind k to w and returns the status
// and headers to send before it.
func writeGemError(w io.Writer, k Kind, p Params) (int, http.Header) {
	p = p.withDefaults(k)
	h := http.Header{}
	switch k {
	case BadGatewayHTML:
		h.Set("Content-Type", "text/html; charset=UTF-8")
		h.Set("Content-Length", strconv.Itoa(len(badGatewayPage)))
		_, _ = io.WriteString(w, badGatewayPage)
		return p.Status, h
	case EmptyBody:
		h.Set("Content-Length", "0")
		return p.Status, h
	case HugeBody:
		h.Set("Content-Type", jsonContentType)
		writeHugeBody(w, gemErrorOf(k, p), p.BodySize)
		return p.Status, h
	}
	b, _ := json.MarshalIndent(gemError{Error: gemErrorOf(k, p)}, "", "  ")
	b = append(b, '\n')
	h.Set("Content-Type", jsonContentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if p.RetryAfter != "" && (k == RateLimited || k == QuotaExhausted || k == Unavailable) {
		h.Set("Retry-After", p.RetryAfter)
	}
	_, _ = w.Write(b)
	return p.Status, h
}

// writeHugeBody writes exactly size bytes (or the shortest valid body if
// size is smaller): the JSON envelope of e with its message padded by 'x'.
func writeHugeBody(w io.Writer, e any, size int) {
	prefix, suffix := hugeEnvelope(e)
	pad := size - len(prefix) - len(suffix)
	_, _ = io.WriteString(w, prefix)
	chunk := bytes.Repeat([]byte{'x'}, 32<<10)
	for pad > 0 {
		n := min(pad, len(chunk))
		if _, err := w.Write(chunk[:n]); err != nil {
			return
		}
		pad -= n
	}
	_, _ = io.WriteString(w, suffix)
}

// hugeEnvelope splits the JSON of e around the marker in its message.
func hugeEnvelope(e any) (prefix, suffix string) {
	const marker = "\x00PAD\x00"
	switch v := e.(type) {
	case gemErrorBody:
		v.Message = marker
		e = gemError{Error: v}
	case oaiErrorBody:
		v.Message = marker
		e = oaiError{Error: v}
	}
	b, _ := json.Marshal(e)
	esc, _ := json.Marshal(marker)
	enc := string(esc[1 : len(esc)-1])
	before, after, _ := strings.Cut(string(b), enc)
	return before, after
}

// OpenAI's error envelope: {"error":{"message","type","param","code"}}.
type oaiError struct {
	Error oaiErrorBody `json:"error"`
}

type oaiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type oaiNoCodeError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func strp(s string) *string { return &s }

// oaiStatus is the status the OpenAI endpoint answers for k.
func oaiStatus(k Kind, p Params) int {
	switch k {
	case InvalidAPIKey:
		return http.StatusUnauthorized
	case PromptBlocked:
		return http.StatusBadRequest
	}
	return p.Status
}

func oaiErrorOf(k Kind, p Params) oaiErrorBody {
	var e oaiErrorBody
	switch k {
	case Unavailable:
		e = oaiErrorBody{Message: "The model is overloaded. Please try again later.", Type: "service_unavailable_error", Code: strp("server_is_overloaded")}
	case Internal, HugeBody:
		e = oaiErrorBody{Message: "The server had an error while processing your request. Sorry about that!", Type: "server_error"}
	case DeadlineExceeded:
		e = oaiErrorBody{Message: "Request timed out.", Type: "server_error", Code: strp("timeout")}
	case RateLimited:
		e = oaiErrorBody{
			Message: "Rate limit reached for " + p.Model + " in organization org-fakegemini on requests per min (RPM): Limit " +
				p.QuotaValue + ", Used " + p.QuotaValue + ", Requested 1. Please try again in " + secondsText(p.RetryDelay) +
				"s. Visit https://platform.openai.com/account/rate-limits to learn more.",
			Type: "requests", Code: strp("rate_limit_exceeded"),
		}
	case QuotaExhausted:
		e = oaiErrorBody{
			Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			Type:    "insufficient_quota", Code: strp("insufficient_quota"),
		}
	case Retired:
		e = oaiErrorBody{Message: "The model `" + p.Model + "` does not exist or you do not have access to it.", Type: "invalid_request_error", Code: strp("model_not_found")}
	case TokenLimit:
		e = oaiErrorBody{
			Message: fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", p.TokenLimit, p.InputTokens),
			Type:    "invalid_request_error", Param: strp("messages"), Code: strp("context_length_exceeded"),
		}
	case BadRequest:
		e = oaiErrorBody{Message: "Invalid request.", Type: "invalid_request_error"}
	case InvalidAPIKey:
		e = oaiErrorBody{Message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.", Type: "invalid_request_error", Code: strp("invalid_api_key")}
	case Unauthenticated:
		e = oaiErrorBody{Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", Type: "invalid_request_error"}
	case PermissionDenied:
		e = oaiErrorBody{Message: "Country, region, or territory not supported", Type: "request_forbidden", Code: strp("unsupported_country_region_territory")}
	case PromptBlocked:
		e = oaiErrorBody{Message: "The response was filtered due to the prompt triggering the content management policy.", Type: "invalid_request_error", Param: strp("prompt"), Code: strp("content_filter")}
	}
	if p.Message != "" && k != HugeBody {
		e.Message = p.Message
	}
	return e
}

// OpenAIErrorResponse returns the status, headers and body that the OpenAI
// chat completions endpoint writes for the error kind k (one of
// [ErrorKinds]), in OpenAI's shape {"error":{"message","type","param",
// "code"}}. RateLimited and Unavailable carry Retry-After and
// retry-after-ms headers unless p.OmitRetryAfter is set. For a kind that is
// not an error it returns 0, nil, nil.
func OpenAIErrorResponse(k Kind, p Params) (status int, header http.Header, body []byte) {
	if !k.isError() {
		return 0, nil, nil
	}
	var buf bytes.Buffer
	status, header = writeOAIError(&buf, k, p)
	return status, header, buf.Bytes()
}

func writeOAIError(w io.Writer, k Kind, p Params) (int, http.Header) {
	p = p.withDefaults(k)
	status := oaiStatus(k, p)
	h := http.Header{}
	switch k {
	case BadGatewayHTML, EmptyBody:
		return writeGemError(w, k, p)
	case HugeBody:
		h.Set("Content-Type", "application/json")
		writeHugeBody(w, oaiErrorOf(k, p), p.BodySize)
		return status, h
	}
	var b []byte
	if k == NoCodeJSON {
		var e oaiNoCodeError
		e.Error.Message, e.Error.Type = "Internal error encountered.", "server_error"
		if p.Message != "" {
			e.Error.Message = p.Message
		}
		b, _ = json.Marshal(e)
	} else {
		b, _ = json.Marshal(oaiError{Error: oaiErrorOf(k, p)})
	}
	b = append(b, '\n')
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if (k == RateLimited || k == Unavailable) && !p.OmitRetryAfter {
		if p.RetryAfter != "" {
			h.Set("Retry-After", p.RetryAfter)
		} else {
			h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(p.RetryDelay.Seconds())), 10))
			h.Set("Retry-After-Ms", strconv.FormatInt(p.RetryDelay.Milliseconds(), 10))
		}
	}
	_, _ = w.Write(b)
	return status, h
}
