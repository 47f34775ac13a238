package fallback

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestRecordFitsItsSizeClass: an observed attempt allocates its call
// record, so its size is the observed path's cost: 128 bytes, and 256
// with its deadline's context (the allocator's size classes above them
// are 144 and 288). What a call's responses and a pool's members report
// is out of line, made when they report.
func TestRecordFitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Record{}), uintptr(128))
	assert.LessOrEqual(t, unsafe.Sizeof(timedRecord{}), uintptr(256))
	assert.LessOrEqual(t, unsafe.Sizeof(Reply{}), uintptr(192))
}

// TestAttemptEndPointsToItsReply: an AttemptEnd is passed by value to
// every observer, so it holds its call's Reply (184 bytes) by pointer, and
// the rare cool-down it caused too; so does a LateReply, which also
// carries the calls of a hedge settled late.
func TestAttemptEndPointsToItsReply(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(AttemptEnd{}), uintptr(224))
	assert.LessOrEqual(t, unsafe.Sizeof(LateReply{}), uintptr(72))
}
