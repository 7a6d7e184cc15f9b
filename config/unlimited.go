package config

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// Unlimited is a Count or an Amount without a bound: the zero value in Go,
// the word unlimited in the file.
const Unlimited = 0

// unlimitedWord is how the file says Unlimited.
const unlimitedWord = "unlimited"

// Count bounds a number of things per period (calls per day, environments):
// a whole number from 1, or Unlimited. In the file it is the number or the
// word unlimited; 0 is refused there, so that no value read as "no bound"
// can come from a field left at 0 or cut short by a half-written file.
type Count int

// Amount bounds a quantity per period (vCPU-hours, GB-hours): a number more
// than 0, or Unlimited; written like a Count.
type Amount float64

// UnmarshalYAML reads a number from 1 or the word unlimited.
func (c *Count) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeBound[int](n)
	*c = Count(v)
	return err
}

// MarshalYAML writes Unlimited as the word unlimited.
func (c Count) MarshalYAML() (any, error) {
	if c == Unlimited {
		return unlimitedWord, nil
	}
	return int(c), nil
}

// UnmarshalYAML reads a number more than 0 or the word unlimited.
func (a *Amount) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeBound[float64](n)
	*a = Amount(v)
	return err
}

// MarshalYAML writes Unlimited as the word unlimited.
func (a Amount) MarshalYAML() (any, error) {
	if a == Unlimited {
		return unlimitedWord, nil
	}
	if math.IsInf(float64(a), 0) || math.IsNaN(float64(a)) {
		return strconv.FormatFloat(float64(a), 'g', -1, 64), nil
	}
	return float64(a), nil
}

// decodeBound reads the word unlimited (Unlimited) or a number, refusing 0.
func decodeBound[T int | float64](n *yaml.Node) (T, error) {
	if isUnlimited(n) {
		return Unlimited, nil
	}
	var v T
	if err := n.Decode(&v); err != nil {
		return 0, err
	}
	if v == 0 {
		return 0, zeroBound(n)
	}
	return v, nil
}

func isUnlimited(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == unlimitedWord
}

// zeroBound refuses 0 as a TypeError, which the decoder reports with the
// others, by line.
func zeroBound(n *yaml.Node) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf(
		"line %d: 0 is not a bound: write %s for none, or a number more than 0", n.Line, unlimitedWord)}}
}

// LogValue logs Unlimited as the word, as the file writes it.
func (c Count) LogValue() slog.Value {
	if c == Unlimited {
		return slog.StringValue(unlimitedWord)
	}
	return slog.IntValue(int(c))
}

// LogValue logs Unlimited as the word, as the file writes it.
func (a Amount) LogValue() slog.Value {
	if a == Unlimited {
		return slog.StringValue(unlimitedWord)
	}
	return slog.Float64Value(float64(a))
}
