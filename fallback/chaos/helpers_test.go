package chaos_test

import (
	"context"
	"iter"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
)

// upstream is a healthy tier: it answers "ok:" + its input after take,
// and counts its calls.
type upstream struct {
	name  string
	take  time.Duration
	calls atomic.Int64
}

func (u *upstream) Name() string { return u.name }

func (u *upstream) Call(ctx context.Context, in string) (string, error) {
	u.calls.Add(1)
	if u.take > 0 {
		t := time.NewTimer(u.take)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return "ok:" + in, nil
}

// chunk is a stream chunk of the test's stream tier.
type chunk struct {
	text, finish string
}

// streamer streams n chunks, gap apart, the last with finish reason STOP.
type streamer struct {
	name  string
	n     int
	gap   time.Duration
	calls atomic.Int64
}

func (s *streamer) Name() string { return s.name }

func (s *streamer) Inspect(c chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish}
}

func (s *streamer) Stream(ctx context.Context, in string) iter.Seq2[chunk, error] {
	return func(yield func(chunk, error) bool) {
		s.calls.Add(1)
		for i := range s.n {
			if s.gap > 0 {
				t := time.NewTimer(s.gap)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					yield(chunk{}, ctx.Err())
					return
				}
			}
			c := chunk{text: string(rune('a' + i))}
			if i == s.n-1 {
				c.finish = "STOP"
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// collect ranges over a stream and returns its chunks and its error.
func collect(seq iter.Seq2[chunk, error]) (chunks []chunk, err error) {
	for c, e := range seq {
		if e != nil {
			return chunks, e
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

// always is a drill of one rule hitting every call, for a minute.
func always(f chaos.Fault) chaos.Drill {
	return chaos.Drill{Name: "test", For: time.Minute, Rules: []chaos.Rule{{Fault: f, Rate: 1}}}
}
