package keyed

import (
	"crypto/sha256"
	"encoding/hex"
)

// Name is what a group member is called in errors, logs and metrics:
// prefix+"/"+key when keys are shown, prefix+"/#"+Hash(key) otherwise. A
// group key is often a tenant or user id, which must not reach those
// signals unless the user says so.
func Name(prefix, key string, show bool) string {
	if show {
		return prefix + "/" + key
	}
	return prefix + "/#" + Hash(key)
}

// Hash is a short stable pseudonym for key: the first 12 hex digits (48
// bits) of its SHA-256, the same in every process, so that a dashboard can
// follow one member and an operator can find a known key's member. It hides
// a key from a casual reader, not from someone who can guess it.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:6])
}
