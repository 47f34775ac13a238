package classify_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"37", 37 * time.Second, true},
		{" 120 ", 120 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"1000000000", classify.MaxRetryAfter, true},
		{"99999999999999999999999999999", classify.MaxRetryAfter, true},
		{now.Add(time.Minute).Format(http.TimeFormat), time.Minute, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{now.Add(1000 * time.Hour).Format(http.TimeFormat), classify.MaxRetryAfter, true},
		{"Sunday, 29-Nov-26 12:00:30 GMT", 30 * time.Second, true},
		{"-5", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"1e9", 0, false},
		{"5s", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
	}
	for _, tt := range tests {
		got, ok := classify.ParseRetryAfter(tt.in, now)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}

func TestParseRetryDelay(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"37s", 37 * time.Second, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"0.000000001s", time.Nanosecond, true},
		{"0.0000000019s", time.Nanosecond, true},
		{"0s", 0, true},
		{"86401s", classify.MaxRetryAfter, true},
		{"-5s", 0, false},
		{"1e308s", 0, false},
		{"37", 0, false},
		{"s", 0, false},
		{"37ms", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := classify.ParseRetryDelay(tt.in)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}
