package fakegemini

import (
	"net/http"
	"sync"
	"time"
)

// Quota is a request quota the server enforces the way the real API
// enforces a per-minute limit: over a sliding window, answering 429
// RESOURCE_EXHAUSTED (kind RateLimited) with a RetryInfo delay that says
// when the oldest counted request leaves the window. Refused requests do
// not count.
type Quota struct {
	// Model is the model id the quota applies to; "" means every model.
	Model string
	// Key, when set, limits only the requests made with that API key;
	// "" counts every request of the model together.
	Key string
	// Requests is the number allowed in any window of Per.
	Requests int
	// Per is the window; 0 means a minute.
	Per time.Duration
}

// quotaTable holds the quotas and the requests each has counted.
type quotaTable struct {
	mu sync.Mutex
	qs []*quotaState
}

type quotaState struct {
	Quota
	// at are the arrival times of the counted requests, oldest first.
	at []time.Time
}

// SetQuota adds q, replacing a quota of the same Model and Key.
func (s *Server) SetQuota(q Quota) {
	if q.Per <= 0 {
		q.Per = time.Minute
	}
	t := &s.quotas
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.qs {
		if x.Model == q.Model && x.Key == q.Key {
			t.qs[i] = &quotaState{Quota: q}
			return
		}
	}
	t.qs = append(t.qs, &quotaState{Quota: q})
}

// ClearQuotas removes every quota.
func (s *Server) ClearQuotas() {
	s.quotas.mu.Lock()
	s.quotas.qs = nil
	s.quotas.mu.Unlock()
}

// overQuota counts a request of model with r's key against the quotas
// that cover it, and returns the wait a refusal advertises.
func (s *Server) overQuota(model string, r *http.Request) (time.Duration, bool) {
	t := &s.quotas
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.qs) == 0 {
		return 0, false
	}
	key := apiKey(r)
	now := s.now()
	var covering []*quotaState
	for _, q := range t.qs {
		if (q.Model == "" || q.Model == model) && (q.Key == "" || q.Key == key) {
			i := 0
			for i < len(q.at) && !q.at[i].After(now.Add(-q.Per)) {
				i++
			}
			q.at = q.at[i:]
			if len(q.at) >= q.Requests {
				wait := q.Per
				if len(q.at) > 0 {
					wait = q.at[0].Add(q.Per).Sub(now)
				}
				return max(wait, time.Millisecond), true
			}
			covering = append(covering, q)
		}
	}
	for _, q := range covering {
		q.at = append(q.at, now)
	}
	return 0, false
}
