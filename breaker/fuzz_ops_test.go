package breaker_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// FuzzBreakerOps drives a breaker with an arbitrary sequence of calls,
// outcomes (reported in any order, stale ones included) and waits, against
// a model of the state machine: it trips on exactly ConsecutiveFailures
// counted failures in a row, half-opens exactly when the cooldown ends,
// admits at most HalfOpenProbes probes at once — probes of earlier
// half-open phases that have not reported included — closes after
// ProbeSuccesses probe successes and reopens on a probe failure; stale and
// ignored outcomes decide nothing; every transition is a legal one.
func FuzzBreakerOps(f *testing.F) {
	f.Add(uint8(2), uint8(1), uint8(1), uint8(10), []byte{0, 2, 0, 2, 5, 80, 0, 3, 0})
	f.Add(uint8(0), uint8(2), uint8(2), uint8(1), []byte{0, 0, 0, 8, 8, 8, 11, 0, 0, 0, 0, 3, 4, 5, 0, 0, 3, 3})
	f.Add(uint8(4), uint8(0), uint8(3), uint8(99), []byte{1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 5, 255, 1, 1, 4, 4, 4})
	f.Fuzz(func(t *testing.T, consecutive, probes, successes, cooldownMs uint8, ops []byte) {
		cfg := breaker.Config{
			Name:                "fz",
			ConsecutiveFailures: 1 + int(consecutive%5),
			HalfOpenProbes:      1 + int(probes%3),
			ProbeSuccesses:      1 + int(successes%3),
			Cooldown:            time.Duration(1+int(cooldownMs%100)) * time.Millisecond,
		}
		synctest.Test(t, func(t *testing.T) {
			b, err := breaker.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			last := breaker.Closed
			b.Observe(func(tr breaker.Transition) {
				mu.Lock()
				defer mu.Unlock()
				legal := tr.From == last && (tr.From == breaker.Closed && tr.To == breaker.Open ||
					tr.From == breaker.Open && tr.To == breaker.HalfOpen ||
					tr.From == breaker.HalfOpen && (tr.To == breaker.Closed || tr.To == breaker.Open) ||
					tr.Reason == "reset")
				if !legal {
					t.Errorf("illegal transition %v → %v (%s) after %v", tr.From, tr.To, tr.Reason, last)
				}
				last = tr.To
			})

			type held struct {
				tok   breaker.Token
				gen   uint64
				probe bool
			}
			var tokens []held
			gen, state := breaker.Generation(b), b.State()
			consec, probeOK := 0, 0
			openedAt := time.Now()
			// expect checks the breaker moved to want (or stayed, for
			// stay) and updates the model.
			expect := func(want breaker.State, moved bool, what string) {
				t.Helper()
				switch g := breaker.Generation(b); {
				case moved && (g != gen+1 || b.State() != want):
					t.Fatalf("%s: want %v in generation %d, got %v in %d", what, want, gen+1, b.State(), g)
				case !moved && g != gen:
					t.Fatalf("%s: unexpected move to %v", what, b.State())
				}
				if moved {
					gen, state, consec, probeOK = gen+1, want, 0, 0
					if want == breaker.Open {
						openedAt = time.Now()
					}
				}
			}
			heldProbes := func() int {
				n := 0
				for _, h := range tokens {
					if h.probe {
						n++
					}
				}
				return n
			}
			for i, op := range ops {
				if i == 400 {
					break
				}
				arg := int(op / 6)
				switch op % 6 {
				case 0, 1:
					tok, err := b.Allow()
					mayPass := state == breaker.Closed || state == breaker.HalfOpen && heldProbes() < cfg.HalfOpenProbes
					if (err == nil) != mayPass {
						t.Fatalf("Allow in %v with %d probes held: err %v", state, heldProbes(), err)
					}
					if err != nil {
						if !errors.Is(err, breaker.ErrOpen) {
							t.Fatalf("rejection %v does not match ErrOpen", err)
						}
						continue
					}
					if tok.IsProbe() != (state == breaker.HalfOpen) {
						t.Fatalf("token in %v: probe %v", state, tok.IsProbe())
					}
					tokens = append(tokens, held{tok: tok, gen: gen, probe: tok.IsProbe()})
				case 2, 3, 4:
					if len(tokens) == 0 {
						continue
					}
					k := arg % len(tokens)
					h := tokens[k]
					tokens = append(tokens[:k], tokens[k+1:]...)
					o := [...]breaker.Outcome{breaker.Ignored, breaker.Success, breaker.Failure}[op%6-2]
					if h.tok.Stale() != (h.gen != gen) {
						t.Fatalf("Stale() = %v for a token of generation %d in %d", h.tok.Stale(), h.gen, gen)
					}
					h.tok.Done(o)
					switch {
					case h.gen != gen || o == breaker.Ignored:
						expect(state, false, "stale or ignored outcome")
					case state == breaker.Closed && o == breaker.Failure:
						consec++
						expect(breaker.Open, consec >= cfg.ConsecutiveFailures, "closed failure")
					case state == breaker.Closed:
						consec = 0
						expect(state, false, "closed success")
					case o == breaker.Failure:
						expect(breaker.Open, true, "probe failure")
					default:
						probeOK++
						expect(breaker.Closed, probeOK >= cfg.ProbeSuccesses, "probe success")
					}
				case 5:
					time.Sleep(time.Duration(arg) * time.Millisecond)
					synctest.Wait()
					expect(breaker.HalfOpen, state == breaker.Open && time.Since(openedAt) >= cfg.Cooldown, "cooldown")
				}
			}
			for _, h := range tokens {
				h.tok.Done(breaker.Ignored)
			}
			if state == breaker.HalfOpen {
				// No probe slot leaked: all of them are free again.
				for range cfg.HalfOpenProbes {
					tok, err := b.Allow()
					if err != nil {
						t.Fatalf("probe slot leaked: %v", err)
					}
					defer tok.Done(breaker.Ignored)
				}
			}
			b.Reset()
		})
	})
}
