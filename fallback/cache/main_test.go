package cache_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/classify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func classifyTransient(err error) error {
	return classify.Wrap(err, classify.Verdict{Class: classify.Transient, HTTPStatus: 503, Reason: "scripted"})
}
