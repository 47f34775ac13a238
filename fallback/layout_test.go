package fallback

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestRecordFitsItsSizeClass: an observed attempt allocates its call
// record, so its size is the observed path's cost: 320 bytes, and 448
// with its deadline's context (the allocator's size classes above them
// are 352 and 480). What a pool's members report is out of line.
func TestRecordFitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Record{}), uintptr(320))
	assert.LessOrEqual(t, unsafe.Sizeof(timedRecord{}), uintptr(448))
	assert.LessOrEqual(t, unsafe.Sizeof(Reply{}), uintptr(184))
}
