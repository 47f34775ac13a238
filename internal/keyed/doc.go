// Package keyed holds one value per key, created on first use, with a bound
// on the number of keys: the mechanics shared by breaker.Group and
// bulkhead.Group.
package keyed
