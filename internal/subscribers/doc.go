// Package subscribers is the copy-on-write list behind the Observe methods
// of tierguard's types: adding and removing a subscriber take a lock and
// publish a new slice, and the path that notifies reads it with one atomic
// load, without a lock or an allocation.
package subscribers
