module github.com/tierguard/tierguard/internal/testbed/benchcmp

go 1.26.0

toolchain go1.26.11

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/tierguard/tierguard v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect
