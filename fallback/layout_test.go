package fallback

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestRecordFitsItsSizeClass: an observed attempt allocates its call
// record, so its size is the observed path's cost: 384 bytes, and 512
// with its deadline's context (the allocator's size classes above them
// are 416 and 576).
func TestRecordFitsItsSizeClass(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Record{}), uintptr(384))
	assert.LessOrEqual(t, unsafe.Sizeof(timedRecord{}), uintptr(512))
	assert.LessOrEqual(t, unsafe.Sizeof(Reply{}), uintptr(184))
}
