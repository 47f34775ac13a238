// Package modcheck holds the test that keeps the root module light: what
// a service that imports tierguard's packages compiles in is the
// OpenTelemetry API, the JSON Schema validator and what those two need,
// nothing else. SDKs, exporters, stores and test helpers belong in nested
// modules or in tests.
package modcheck
