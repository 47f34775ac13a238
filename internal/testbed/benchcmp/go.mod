module github.com/tierguard/tierguard/internal/testbed/benchcmp

go 1.26.0

toolchain go1.26.11

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/tierguard/tierguard v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/text v0.44.0 // indirect
)
