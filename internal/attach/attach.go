package attach

import (
	"reflect"
	"slices"
	"sync"
)

// Set holds values attached by key. Its zero value is empty and ready;
// it is safe for concurrent use and must not be copied after first use.
type Set struct {
	mu      sync.Mutex
	entries []*entry
}

// entry is a value attached under key, and how many callers hold it.
type entry struct {
	key, value any
	holds      int
}

// Attach returns the value attached under key — made by calling newValue
// when none is — and the function with which the caller lets go of it.
// The value stays until everyone who got it has let go; the next Attach
// then makes a new one. key must be comparable, and of a type of the
// caller's own, as a context key is; owner names the guard's package in
// the panic that refuses any other. newValue runs under the set's lock:
// it must not attach to the same set. Letting go more than once lets go
// once.
func (s *Set) Attach(owner string, key any, newValue func() any) (value any, detach func()) {
	if key == nil || !reflect.TypeOf(key).Comparable() {
		panic(owner + ": Attach key is not comparable")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.entries, func(e *entry) bool { return e.key == key })
	if i < 0 {
		i = len(s.entries)
		s.entries = append(s.entries, &entry{key: key, value: newValue()})
	}
	e := s.entries[i]
	e.holds++
	var once sync.Once
	return e.value, func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if e.holds--; e.holds == 0 {
				s.entries = slices.DeleteFunc(s.entries, func(x *entry) bool { return x == e })
			}
		})
	}
}

// Len returns how many values are attached.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
