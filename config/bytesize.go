package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Byte-size units. KB, MB and GB are powers of 1000; KiB, MiB and GiB of 1024.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

// units are the suffixes ParseByteSize accepts, case-sensitive: "mb" is
// refused rather than guessed as millibits or megabytes.
var units = map[string]ByteSize{
	"":    1,
	"B":   1,
	"KB":  1000,
	"MB":  1000 * 1000,
	"GB":  1000 * 1000 * 1000,
	"KiB": KiB,
	"MiB": MiB,
	"GiB": GiB,
}

// ParseByteSize parses a whole, non-negative number of bytes with an
// optional unit: "512", "512B", "64KiB", "4 MiB", "1GB". Units are
// case-sensitive; fractions ("1.5MiB") and negative sizes are refused.
func ParseByteSize(s string) (ByteSize, error) {
	n, err := parseByteSize(s)
	if err != nil {
		return 0, fmt.Errorf("invalid byte size %q: %w", s, err)
	}
	return n, nil
}

func parseByteSize(s string) (ByteSize, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	if s[0] == '-' {
		return 0, errors.New("must not be negative")
	}
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, errors.New(`must start with a whole number, as in "4MiB"`)
	}
	digits, unit := s[:i], strings.TrimLeft(s[i:], " ")
	if strings.HasPrefix(unit, ".") {
		return 0, errors.New(`must be a whole number; use a smaller unit ("1536KiB", not "1.5MiB")`)
	}
	mult, ok := units[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (use B, KB, MB, GB, KiB, MiB or GiB)", unit)
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || ByteSize(n) > math.MaxInt64/mult {
		return 0, errors.New("too large")
	}
	return ByteSize(n) * mult, nil
}

// String writes the size in the largest binary unit that holds it exactly
// ("4MiB", "1500B"), a form ParseByteSize reads back.
func (b ByteSize) String() string {
	switch {
	case b == 0:
		return "0B"
	case b%GiB == 0:
		return strconv.FormatInt(int64(b/GiB), 10) + "GiB"
	case b%MiB == 0:
		return strconv.FormatInt(int64(b/MiB), 10) + "MiB"
	case b%KiB == 0:
		return strconv.FormatInt(int64(b/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// UnmarshalYAML reads an integer (bytes) or a string with a unit. Its errors
// are yaml.TypeErrors carrying the line, so that they are reported together
// with the file's other problems.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	fail := func(format string, args ...any) error {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
	}
	if n.Kind != yaml.ScalarNode {
		return fail(`must be a byte size such as 4194304 or "4MiB"`)
	}
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			return fail("invalid byte size %s: too large", n.Value)
		}
		if v < 0 {
			return fail("invalid byte size %s: must not be negative", n.Value)
		}
		*b = ByteSize(v)
		return nil
	case "!!str":
		v, err := ParseByteSize(n.Value)
		if err != nil {
			return fail("%v", err)
		}
		*b = v
		return nil
	}
	return fail(`invalid byte size %s: want a whole number of bytes or a string such as "4MiB"`, n.Value)
}

// MarshalYAML writes the size as String does.
func (b ByteSize) MarshalYAML() (any, error) {
	return b.String(), nil
}
