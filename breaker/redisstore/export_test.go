package redisstore

// Idle reports whether no proposal of s is waiting to be written or being
// written, so that a test can tell when the fleet has settled.
func Idle(s *Store) bool {
	if len(s.queue) > 0 {
		return false
	}
	for _, m := range s.snapshot() {
		if m.pending.Load() > 0 {
			return false
		}
	}
	return true
}
