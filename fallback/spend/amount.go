package spend

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Amount is a sum of money in nano-units of the price table's currency
// (10⁻⁹ of a dollar, say). Integer arithmetic keeps a ledger exact: a
// million requests of 7.5 micro-dollars add up to exactly 7.5 dollars.
// An int64 holds about 9.2 billion currency units.
type Amount int64

// Nano is the smallest Amount; Unit is one currency unit (a dollar).
const (
	Nano Amount = 1
	Unit Amount = 1_000_000_000
)

// maxDecimals is how many decimals an Amount has.
const maxDecimals = 9

// ParseAmount reads a decimal number of currency units ("1.25", "0.000075",
// "3") exactly, without a float in between. It accepts at most 9 decimals
// and refuses negative amounts.
func ParseAmount(s string) (Amount, error) {
	v, err := parseFixed(s, maxDecimals)
	if err != nil {
		return 0, fmt.Errorf("spend: amount %q: %w", truncate(s), err)
	}
	return Amount(v), nil
}

// MustParseAmount is ParseAmount for constants; it panics on a bad amount.
func MustParseAmount(s string) Amount {
	a, err := ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// String formats a as a decimal number of currency units, without trailing
// zeros: "1.25", "0.000075", "3".
func (a Amount) String() string {
	neg := a < 0
	u := uint64(a)
	if neg {
		u = -u
	}
	whole, frac := u/uint64(Unit), u%uint64(Unit)
	s := strconv.FormatUint(whole, 10)
	if frac != 0 {
		f := strconv.FormatUint(frac, 10)
		s += "." + strings.TrimRight(strings.Repeat("0", maxDecimals-len(f))+f, "0")
	}
	if neg {
		return "-" + s
	}
	return s
}

// Float returns a in currency units as a float, for display and metrics.
func (a Amount) Float() float64 { return float64(a) / float64(Unit) }

// MarshalJSON writes a as a JSON number of currency units.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON reads a JSON number or a string holding one ("1.25"),
// exactly.
func (a *Amount) UnmarshalJSON(b []byte) error {
	s := string(b)
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := ParseAmount(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// parseFixed parses a non-negative decimal with at most decimals digits
// after the point into an integer scaled by 10^decimals. It accepts an
// exponent ("1e-6", "2.5E+3") when the result is exact.
func parseFixed(s string, decimals int) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	if len(s) > 64 {
		return 0, errors.New("too long")
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e < -30 || e > 30 {
			return 0, errors.New("bad exponent")
		}
		mant, exp = s[:i], e
	}
	if strings.HasPrefix(mant, "-") {
		return 0, errors.New("negative")
	}
	mant = strings.TrimPrefix(mant, "+")
	intPart, fracPart, _ := strings.Cut(mant, ".")
	if intPart == "" && fracPart == "" {
		return 0, errors.New("no digits")
	}
	digits := intPart + fracPart
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, errors.New("not a decimal number")
		}
	}
	// The value is digits × 10^(exp − len(fracPart)); scaled, the power is
	// shift.
	shift := decimals + exp - len(fracPart)
	digits = strings.TrimLeft(digits, "0")
	if shift < 0 {
		cut := len(digits) + shift
		if cut < 0 {
			cut = 0
		}
		if strings.Trim(digits[cut:], "0") != "" {
			return 0, fmt.Errorf("more than %d decimals", decimals)
		}
		digits, shift = digits[:cut], 0
	}
	if digits == "" {
		return 0, nil
	}
	if len(digits)+shift > 19 {
		return 0, errors.New("too large")
	}
	v, err := strconv.ParseUint(digits+strings.Repeat("0", shift), 10, 64)
	if err != nil || v > math.MaxInt64 {
		return 0, errors.New("too large")
	}
	return int64(v), nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// acc sums products of token counts and rates (nano-units per million
// tokens) in 128 bits, so that no product overflows before the one
// division by a million.
type acc struct{ hi, lo uint64 }

func (a *acc) add(tokens int64, rate Amount) {
	if tokens <= 0 || rate <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(rate))
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi += hi + carry
}

// perMillion returns the sum divided by a million, rounded half up, and
// saturated at the largest Amount.
func (a acc) perMillion() Amount {
	const m = 1_000_000
	if a.hi == 0 {
		// The sum fits 64 bits, as every call's does but the largest: a
		// division by a constant, which compiles to a multiplication, not
		// the 128-bit division.
		q, r := a.lo/m, a.lo%m
		if r >= m/2 {
			q++
		}
		return Amount(min(q, math.MaxInt64))
	}
	if a.hi >= m {
		return math.MaxInt64
	}
	q, r := bits.Div64(a.hi, a.lo, m)
	if r >= m/2 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return Amount(q)
}

// addSat adds two amounts, saturating instead of wrapping.
func addSat(a, b Amount) Amount {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}
