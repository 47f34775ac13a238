package classify

import (
	"strings"
	"time"
)

// Bounds on how much of an error the classifier inspects. They keep a 10 MB
// body or a details list of a million entries to a fixed cost.
const (
	maxInspect    = 64 << 10 // bytes of a message searched for hints
	maxDetails    = 32       // entries of details examined
	maxViolations = 32       // QuotaFailure violations examined
	maxIDLen      = 256      // bytes of a quotaId / reason examined
)

// detailFacts is what google.rpc error details say about a failure.
type detailFacts struct {
	retryDelay    time.Duration
	hasRetryDelay bool
	perDayQuota   bool
	reason        string // an ErrorInfo reason from knownReasons, or ""
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
	"USER_PROJECT_DENIED":             Auth,
	"IAM_PERMISSION_DENIED":           Auth,
	"BILLING_DISABLED":                QuotaExhausted,
	"RATE_LIMIT_EXCEEDED":             RateLimited,
}

// readDetails scans google.rpc error details decoded from JSON, as the genai
// SDK exposes them (APIError.Details): RetryInfo, QuotaFailure and ErrorInfo.
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
				if delay, ok := ParseRetryDelay(s); ok {
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
				if names(m, "quotaId", "PerDay") || names(m, "quotaMetric", "per_day") {
					f.perDayQuota = true
				}
			}
		case strings.HasSuffix(typ, "google.rpc.ErrorInfo"):
			if r, ok := d["reason"].(string); ok && len(r) <= maxIDLen {
				if _, known := knownReasons[r]; known && f.reason == "" {
					f.reason = r
				}
			}
		}
	}
	return f
}

// names reports whether m[key] is a string that contains part.
func names(m map[string]any, key, part string) bool {
	s, _ := m[key].(string)
	if len(s) > maxIDLen {
		s = s[:maxIDLen]
	}
	return strings.Contains(s, part)
}
