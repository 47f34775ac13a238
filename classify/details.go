package classify

import (
	"strings"
	"time"
)

// Bounds on how much of an error the classifier inspects. They keep a 10 MB
// body or a details list of a million entries to a fixed cost.
const (
	maxInspect    = 64 << 10 // bytes of a message searched for hints
	maxDetails    = 32       // entries of details (or of an array body) examined
	maxViolations = 32       // QuotaFailure violations examined
	maxIDLen      = 256      // bytes of a quotaId, reason or code examined
)

// detailFacts is what google.rpc error details say about a failure.
type detailFacts struct {
	retryDelay    time.Duration
	hasRetryDelay bool
	// perDayQuota is set for a quota waiting cannot satisfy soon: one named
	// per day, or one whose limit is zero.
	perDayQuota bool
	// perMinuteQuota is set when a QuotaFailure violation, or Vertex's
	// ErrorInfo metadata, names a per-minute quota.
	perMinuteQuota bool
	reason         string // an ErrorInfo reason from knownReasons, or ""
}

// knownReasons are the ErrorInfo reasons the classifier acts on, mapped to
// the class they force. Anything else is ignored.
var knownReasons = map[string]Class{
	"API_KEY_INVALID":                 Auth,
	"API_KEY_EXPIRED":                 Auth,
	"API_KEY_SERVICE_BLOCKED":         Auth,
	"API_KEY_HTTP_REFERRER_BLOCKED":   Auth,
	"API_KEY_IP_ADDRESS_BLOCKED":      Auth,
	"API_KEY_ANDROID_APP_BLOCKED":     Auth,
	"API_KEY_IOS_APP_BLOCKED":         Auth,
	"ACCESS_TOKEN_EXPIRED":            Auth,
	"ACCESS_TOKEN_SCOPE_INSUFFICIENT": Auth,
	"CREDENTIALS_MISSING":             Auth,
	"SERVICE_DISABLED":                Auth,
	"CONSUMER_INVALID":                Auth,
	"CONSUMER_SUSPENDED":              Auth,
	"USER_PROJECT_DENIED":             Auth,
	"IAM_PERMISSION_DENIED":           Auth,
	"BILLING_DISABLED":                QuotaExhausted,
	"QUOTA_EXHAUSTED":                 QuotaExhausted,
	"RATE_LIMIT_EXCEEDED":             RateLimited,
}

// readDetails scans google.rpc error details decoded from JSON, as the genai
// SDK exposes them (APIError.Details): RetryInfo, QuotaFailure, and
// ErrorInfo with its reason and metadata.
func readDetails(details []map[string]any) detailFacts {
	var f detailFacts
	for i, d := range details {
		if i == maxDetails {
			break
		}
		typ, _ := d["@type"].(string)
		switch {
		case strings.HasSuffix(typ, "google.rpc.RetryInfo"):
			if s, ok := d["retryDelay"].(string); ok {
				if delay, ok := parseRetryDelay(s); ok {
					f.retryDelay = max(f.retryDelay, delay)
					f.hasRetryDelay = true
				}
			}
		case strings.HasSuffix(typ, "google.rpc.QuotaFailure"):
			vs, _ := d["violations"].([]any)
			for j, v := range vs {
				if j == maxViolations {
					break
				}
				m, _ := v.(map[string]any)
				if perDay(field(m, "quotaId")) || perDay(field(m, "quotaMetric")) || field(m, "quotaValue") == "0" {
					f.perDayQuota = true
				}
				if perMinute(field(m, "quotaId")) || perMinute(field(m, "quotaMetric")) {
					f.perMinuteQuota = true
				}
			}
		case strings.HasSuffix(typ, "google.rpc.ErrorInfo"):
			if r, ok := d["reason"].(string); ok && len(r) <= maxIDLen {
				if known, ok := knownReasons[r]; ok && (f.reason == "" || precedes(known, knownReasons[f.reason])) {
					f.reason = r
				}
			}
			// Vertex AI names the quota in ErrorInfo's metadata:
			// {"quota_limit":"GenerateContentRequestsPerDayPerProjectPerModel",
			//  "quota_metric":"aiplatform.googleapis.com/generate_content_requests"}.
			md, _ := d["metadata"].(map[string]any)
			if perDay(field(md, "quota_limit")) || perDay(field(md, "quota_metric")) || perDay(field(md, "quota_limit_id")) ||
				field(md, "quota_limit_value") == "0" {
				f.perDayQuota = true
			}
			if perMinute(field(md, "quota_limit")) || perMinute(field(md, "quota_limit_id")) {
				f.perMinuteQuota = true
			}
		}
	}
	return f
}

// precedes orders two ErrorInfo classes when a response carries several: a
// credential problem outranks a quota, which outranks a rate limit.
func precedes(a, b Class) bool {
	rank := func(c Class) int {
		switch c {
		case Auth:
			return 3
		case QuotaExhausted:
			return 2
		}
		return 1
	}
	return rank(a) > rank(b)
}

// field returns m[key] if it is a string, cut to maxIDLen bytes.
func field(m map[string]any, key string) string {
	s, _ := m[key].(string)
	if len(s) > maxIDLen {
		s = s[:maxIDLen]
	}
	return s
}

// perMinute reports whether a quota id names a per-minute quota:
// "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
// "GenerateContentInputTokensPerModelPerMinute-FreeTier".
func perMinute(id string) bool {
	return strings.Contains(id, "PerMinute") || strings.Contains(id, "per_minute") || strings.Contains(id, "Per-Minute")
}

// perDay reports whether a quota id or metric names a daily quota:
// "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "..._per_day".
func perDay(id string) bool {
	return strings.Contains(id, "PerDay") || strings.Contains(id, "per_day") || strings.Contains(id, "Per-Day")
}
