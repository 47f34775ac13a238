package redisstore

// HoldResyncs makes each resync of s, from its first on, call hold between
// reading its snapshot and delivering it. Call it before a cache observes
// s.
func HoldResyncs(s *Store, hold func()) { s.afterSnapshot = hold }
