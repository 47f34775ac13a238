package chaos

import (
	"errors"
	"net/http"
	"strings"
)

// Response is an upstream's error response — status, headers and body —
// for Fail to answer with. The predefined ones are real responses of the
// Gemini API and of OpenAI-compatible APIs, quoted from public reports
// (each one's Source says where), byte for byte: injected, each classifies
// exactly as the real one did. NewResponse builds others.
type Response struct {
	name   string
	status int
	header [][2]string
	body   string
	source string
	// model is the model id the body names, for WithModel.
	model string
}

// NewResponse returns a Response named name (a short snake_case word, for
// reports) with the given status, headers and body.
func NewResponse(name string, status int, header http.Header, body []byte) (Response, error) {
	var errs []error
	if name == "" {
		errs = append(errs, errors.New("name is empty"))
	}
	if status < 100 || status > 999 {
		errs = append(errs, errors.New("status must be a three-digit HTTP status"))
	}
	if err := errors.Join(errs...); err != nil {
		return Response{}, errors.Join(errors.New("chaos: invalid response"), err)
	}
	r := Response{name: name, status: status, body: string(body)}
	for k, vs := range header {
		for _, v := range vs {
			r.header = append(r.header, [2]string{k, v})
		}
	}
	return r, nil
}

// Name is the response's name in reports ("gemini_503_overloaded").
func (r Response) Name() string { return r.name }

// Status is the HTTP status.
func (r Response) Status() int { return r.status }

// Header returns a copy of the response's headers, Content-Type included.
func (r Response) Header() http.Header {
	h := http.Header{}
	for _, kv := range r.header {
		h.Add(kv[0], kv[1])
	}
	if h.Get("Content-Type") == "" {
		ct := "application/json; charset=UTF-8"
		if b := strings.TrimSpace(r.body); b != "" && b[0] != '{' && b[0] != '[' {
			ct = "text/plain; charset=utf-8"
			if b[0] == '<' {
				ct = "text/html; charset=UTF-8"
			}
		}
		h.Set("Content-Type", ct)
	}
	return h
}

// Body returns a copy of the response's body.
func (r Response) Body() []byte { return []byte(r.body) }

// Source is the public page the response was quoted from ("" for one made
// with NewResponse).
func (r Response) Source() string { return r.source }

// WithModel returns r naming model instead of the model its body names, for
// a drill in which a tier's own model is retired: the chain marks the model
// a 404 names as retired. It returns r unchanged when r names no model or
// model is not a plain model id (letters, digits, '.', '-', '_', '/', ':').
func (r Response) WithModel(model string) Response {
	if r.model == "" || !plainModelID(model) {
		return r
	}
	r.body = strings.ReplaceAll(r.body, r.model, model)
	r.model = model
	return r
}

func plainModelID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-_/:", c) >= 0) {
			return false
		}
	}
	return true
}

// The predefined responses. Gemini's are the Gemini API's own error bodies
// (Google's {"error":{"code","message","status","details"}} form); the
// OpenAI ones are OpenAI's {"error":{"message","type","param","code"}}
// form, as OpenAI and the gateways that follow it send it.
var (
	// GeminiOverloaded is Gemini's 503 UNAVAILABLE "The model is
	// overloaded. Please try again later.": Transient, retried.
	GeminiOverloaded = Response{name: "gemini_503_overloaded", status: 503, body: bodyGeminiOverloaded,
		source: "https://github.com/phanxuanquang/AskDB/issues/7"}
	// GeminiRateLimited is Gemini's 429 RESOURCE_EXHAUSTED for a per-minute
	// quota (input tokens per model per minute, free tier) with a
	// google.rpc.RetryInfo of 26s: RateLimited, retried after 26s if that
	// fits the deadline, else the next tier at once.
	GeminiRateLimited = Response{name: "gemini_429_per_minute_retry_26s", status: 429, body: bodyGeminiRateLimited,
		source: "https://github.com/RooCodeInc/Roo-Code/issues/3883"}
	// GeminiDailyQuota is Gemini's 429 RESOURCE_EXHAUSTED whose
	// google.rpc.QuotaFailure names a per-day quota (requests per day per
	// model, free tier), with a RetryInfo of 22s: QuotaExhausted, the tier
	// is parked.
	GeminiDailyQuota = Response{name: "gemini_429_per_day_quota", status: 429, body: bodyGeminiDailyQuota,
		source: "https://oppl.ai/llms/gemini_complex_1/JE00B3XR4V72.json"}
	// GeminiModelNotFound is Gemini's 404 NOT_FOUND "models/gemini-2.0-pro
	// is not found for API version v1beta, ...": Retired, the model it
	// names is skipped (WithModel names yours).
	GeminiModelNotFound = Response{name: "gemini_404_model_not_found", status: 404, body: bodyGeminiModelNotFound,
		source: "https://github.com/swuecho/chat/issues/597", model: "gemini-2.0-pro"}
	// GeminiCancelled is the 499 CANCELLED "The operation was cancelled."
	// Gemini's backends send under load, as a JSON array: Transient,
	// retried (the caller did not cancel).
	GeminiCancelled = Response{name: "gemini_499_cancelled", status: 499, body: bodyGeminiCancelled,
		source: "https://github.com/google-gemini/gemini-cli/issues/20309"}
	// GeminiInvalidKey is Gemini's 400 INVALID_ARGUMENT "API key not valid"
	// with a google.rpc.ErrorInfo of reason API_KEY_INVALID: Auth, the
	// request fails closed.
	GeminiInvalidKey = Response{name: "gemini_400_api_key_invalid", status: 400, body: bodyGeminiInvalidKey,
		source: "https://github.com/continuedev/continue/issues/9330"}

	// OpenAIServerError is a gateway's 500 in OpenAI's form, wrapping
	// Gemini's 503 overloaded (LiteLLM): Transient, retried.
	OpenAIServerError = Response{name: "openai_500_server_error", status: 500, body: bodyOpenAIServerError,
		source: "https://github.com/BerriAI/litellm/issues/18118"}
	// OpenAIRateLimited is a 429 rate_limit_exceeded for tokens per minute
	// whose message says "Please try again in 50.597142857s." (Groq's
	// OpenAI-compatible API): RateLimited, retried after that long if it
	// fits.
	OpenAIRateLimited = Response{name: "openai_429_per_minute_try_again", status: 429, body: bodyOpenAIRateLimited,
		source: "https://github.com/danielmiessler/Fabric/issues/364"}
	// OpenAIDailyQuota is OpenAI's 429 rate_limit_exceeded "on requests per
	// day (RPD)": QuotaExhausted, the tier is parked.
	OpenAIDailyQuota = Response{name: "openai_429_per_day_quota", status: 429, body: bodyOpenAIDailyQuota,
		source: "https://github.com/MSU-AI-Agents/fall-2025-course/issues/76"}
	// OpenAIInsufficientQuota is OpenAI's 429 insufficient_quota (billing):
	// QuotaExhausted, the tier is parked.
	OpenAIInsufficientQuota = Response{name: "openai_429_insufficient_quota", status: 429, body: bodyOpenAIInsufficientQuota,
		source: "https://github.com/ChatGPTNextWeb/NextChat/issues/3664"}
	// OpenAIModelNotFound is OpenAI's 404 model_not_found "The model:
	// `gpt-4` does not exist": Retired (WithModel names yours).
	OpenAIModelNotFound = Response{name: "openai_404_model_not_found", status: 404, body: bodyOpenAIModelNotFound,
		source: "https://github.com/enricoros/big-AGI/issues/16", model: "gpt-4"}
	// OpenAIInvalidKey is OpenAI's 401 invalid_api_key: Auth, the request
	// fails closed.
	OpenAIInvalidKey = Response{name: "openai_401_invalid_api_key", status: 401, body: bodyOpenAIInvalidKey,
		source: "https://github.com/SevaSk/ecoute/issues/163"}
)

// Responses returns the predefined responses, Gemini's first.
func Responses() []Response {
	return []Response{
		GeminiOverloaded, GeminiRateLimited, GeminiDailyQuota, GeminiModelNotFound, GeminiCancelled, GeminiInvalidKey,
		OpenAIServerError, OpenAIRateLimited, OpenAIDailyQuota, OpenAIInsufficientQuota, OpenAIModelNotFound, OpenAIInvalidKey,
	}
}

// The bodies, byte for byte as the sources show them (after the mechanical
// conversions the conformance corpus notes: a Python repr turned into JSON,
// log prefixes removed).

// https://github.com/phanxuanquang/AskDB/issues/7
// corpus case: gemini-api-overloaded-503-pretty
const bodyGeminiOverloaded = "{\n" +
	"  \"error\": {\n" +
	"    \"code\": 503,\n" +
	"    \"message\": \"The model is overloaded. Please try again later.\",\n" +
	"    \"status\": \"UNAVAILABLE\"\n" +
	"  }\n" +
	"}\n"

// https://github.com/RooCodeInc/Roo-Code/issues/3883
// corpus case: gemini-api-per-minute-input-tokens-429
const bodyGeminiRateLimited = "{\n" +
	"  \"error\": {\n" +
	"    \"code\": 429,\n" +
	"    \"message\": \"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\",\n" +
	"    \"status\": \"RESOURCE_EXHAUSTED\",\n" +
	"    \"details\": [\n" +
	"      {\n" +
	"        \"@type\": \"type.googleapis.com/google.rpc.QuotaFailure\",\n" +
	"        \"violations\": [\n" +
	"          {\n" +
	"            \"quotaMetric\": \"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count\",\n" +
	"            \"quotaId\": \"GenerateContentInputTokensPerModelPerMinute-FreeTier\",\n" +
	"            \"quotaDimensions\": {\n" +
	"              \"location\": \"global\",\n" +
	"              \"model\": \"gemini-2.5-flash\"\n" +
	"            },\n" +
	"            \"quotaValue\": \"250000\"\n" +
	"          }\n" +
	"        ]\n" +
	"      },\n" +
	"      {\n" +
	"        \"@type\": \"type.googleapis.com/google.rpc.Help\",\n" +
	"        \"links\": [\n" +
	"          {\n" +
	"            \"description\": \"Learn more about Gemini API quotas\",\n" +
	"            \"url\": \"https://ai.google.dev/gemini-api/docs/rate-limits\"\n" +
	"          }\n" +
	"        ]\n" +
	"      },\n" +
	"      {\n" +
	"        \"@type\": \"type.googleapis.com/google.rpc.RetryInfo\",\n" +
	"        \"retryDelay\": \"26s\"\n" +
	"      }\n" +
	"    ]\n" +
	"  }\n" +
	"}\n"

// https://oppl.ai/llms/gemini_complex_1/JE00B3XR4V72.json
// corpus case: gemini-api-per-day-429-wrapped
const bodyGeminiDailyQuota = "{\n" +
	"    \"error\": {\n" +
	"        \"code\": 429,\n" +
	"        \"message\": \"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\",\n" +
	"        \"status\": \"RESOURCE_EXHAUSTED\",\n" +
	"        \"details\": [\n" +
	"            {\n" +
	"                \"@type\": \"type.googleapis.com/google.rpc.QuotaFailure\",\n" +
	"                \"violations\": [\n" +
	"                    {\n" +
	"                        \"quotaMetric\": \"generativelanguage.googleapis.com/generate_content_free_tier_requests\",\n" +
	"                        \"quotaId\": \"GenerateRequestsPerDayPerProjectPerModel-FreeTier\",\n" +
	"                        \"quotaDimensions\": {\n" +
	"                            \"location\": \"global\",\n" +
	"                            \"model\": \"gemini-2.5-flash\"\n" +
	"                        },\n" +
	"                        \"quotaValue\": \"250\"\n" +
	"                    }\n" +
	"                ]\n" +
	"            },\n" +
	"            {\n" +
	"                \"@type\": \"type.googleapis.com/google.rpc.Help\",\n" +
	"                \"links\": [\n" +
	"                    {\n" +
	"                        \"description\": \"Learn more about Gemini API quotas\",\n" +
	"                        \"url\": \"https://ai.google.dev/gemini-api/docs/rate-limits\"\n" +
	"                    }\n" +
	"                ]\n" +
	"            },\n" +
	"            {\n" +
	"                \"@type\": \"type.googleapis.com/google.rpc.RetryInfo\",\n" +
	"                \"retryDelay\": \"22s\"\n" +
	"            }\n" +
	"        ]\n" +
	"    }\n" +
	"}\n"

// https://github.com/swuecho/chat/issues/597
// corpus case: gemini-api-model-not-found-404-log
const bodyGeminiModelNotFound = "{\n" +
	"\"error\": {\n" +
	"\"code\": 404,\n" +
	"\"message\": \"models/gemini-2.0-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.\",\n" +
	"\"status\": \"NOT_FOUND\"\n" +
	"}\n" +
	"}\n"

// https://github.com/google-gemini/gemini-cli/issues/20309
// corpus case: gemini-code-assist-cancelled-499-array
const bodyGeminiCancelled = "[{\n" +
	"    \"error\": {\n" +
	"      \"code\": 499,\n" +
	"      \"message\": \"The operation was cancelled.\",\n" +
	"      \"errors\": [\n" +
	"        {\n" +
	"          \"message\": \"The operation was cancelled.\",\n" +
	"          \"domain\": \"global\",\n" +
	"          \"reason\": \"backendError\"\n" +
	"        }\n" +
	"      ],\n" +
	"      \"status\": \"CANCELLED\"\n" +
	"    }\n" +
	"  }\n" +
	"  ]\n"

// https://github.com/continuedev/continue/issues/9330
// corpus case: gemini-api-api-key-invalid-400
const bodyGeminiInvalidKey = "{\n" +
	"  \"error\": {\n" +
	"    \"code\": 400,\n" +
	"    \"message\": \"API key not valid. Please pass a valid API key.\",\n" +
	"    \"status\": \"INVALID_ARGUMENT\",\n" +
	"    \"details\": [\n" +
	"      {\n" +
	"        \"@type\": \"type.googleapis.com/google.rpc.ErrorInfo\",\n" +
	"        \"reason\": \"API_KEY_INVALID\",\n" +
	"        \"domain\": \"googleapis.com\",\n" +
	"        \"metadata\": {\n" +
	"          \"service\": \"generativelanguage.googleapis.com\"\n" +
	"        }\n" +
	"      },\n" +
	"      {\n" +
	"        \"@type\": \"type.googleapis.com/google.rpc.LocalizedMessage\",\n" +
	"        \"locale\": \"en-US\",\n" +
	"        \"message\": \"API key not valid. Please pass a valid API key.\"\n" +
	"      }\n" +
	"    ]\n" +
	"  }\n" +
	"}\n"

// https://github.com/BerriAI/litellm/issues/18118
// corpus case: other-openai-compatible-litellm-wrapped-503
const bodyOpenAIServerError = "{\"error\":{\"message\":\"litellm.InternalServerError: litellm.InternalServerError: geminiException - {\\n  \\\"error\\\": {\\n    \\\"code\\\": 503,\\n    \\\"message\\\": \\\"The model is overloaded. Please try again later.\\\",\\n    \\\"status\\\": \\\"UNAVAILABLE\\\"\\n  }\\n}\\n. Received Model Group=gemini-3-pro-image-preview\\nAvailable Model Group Fallbacks=None\",\"type\":null,\"param\":null,\"code\":\"500\"}}\n"

// https://github.com/danielmiessler/Fabric/issues/364
// corpus case: groq-tpm-429-try-again-in
const bodyOpenAIRateLimited = "{\"error\": {\"message\": \"Rate limit reached for model `llama3-70b-8192` in organization `org_01hrsvc1b8ey0anvbgha0xckf2` on tokens per minute (TPM): Limit 7000, Used 0, Requested ~12903. Please try again in 50.597142857s. Visit https://console.groq.com/docs/rate-limits for more information.\", \"type\": \"tokens\", \"code\": \"rate_limit_exceeded\"}}\n"

// https://github.com/MSU-AI-Agents/fall-2025-course/issues/76
// corpus case: openai-rpd-429-try-again-in
const bodyOpenAIDailyQuota = "{\"error\": {\"message\": \"Rate limit reached for gpt-3.5-turbo in organization org-pR2Z3LP86Rl3jvVG0S9Kv3IT on requests per day (RPD): Limit 10000, Used 10000, Requested 1. Please try again in 8.64s. Visit https://platform.openai.com/account/rate-limits to learn more.\", \"type\": \"requests\", \"param\": null, \"code\": \"rate_limit_exceeded\"}}\n"

// https://github.com/ChatGPTNextWeb/NextChat/issues/3664
// corpus case: openai-insufficient-quota-429
const bodyOpenAIInsufficientQuota = "{\n" +
	"  \"error\": {\n" +
	"    \"message\": \"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.\",\n" +
	"    \"type\": \"insufficient_quota\",\n" +
	"    \"param\": null,\n" +
	"    \"code\": \"insufficient_quota\"\n" +
	"  }\n" +
	"}\n"

// https://github.com/enricoros/big-AGI/issues/16
// corpus case: openai-model-not-found-404
const bodyOpenAIModelNotFound = "{\"error\":{\"message\":\"The model: `gpt-4` does not exist\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}\n"

// https://github.com/SevaSk/ecoute/issues/163
// corpus case: openai-invalid-api-key-401
const bodyOpenAIInvalidKey = "{\"error\": {\"message\": \"Incorrect API key provided: API_KEY. You can find your API key at https://platform.openai.com/account/api-keys.\", \"type\": \"invalid_request_error\", \"param\": null, \"code\": \"invalid_api_key\"}}\n"
