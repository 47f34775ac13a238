package redisstore

// HoldResyncs makes each resync of s, from its first on, call hold between
// reading its snapshot and delivering it. Call it before a cache observes
// s.
func HoldResyncs(s *Store, hold func()) { s.afterSnapshot = hold }

// Quiet reports whether s has handled its subscription's confirmation and
// finished a resync begun after every resync asked for: what it holds
// changes only by what the channel delivers until its next timed resync.
func Quiet(s *Store) bool { return s.subscribed.Load() > 0 && s.kicksDone.Load() >= s.kicks.Load() }
