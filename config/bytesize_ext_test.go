package config_test

import (
	"math"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
)

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    config.ByteSize
		wantErr string
	}{
		{in: "0", want: 0},
		{in: "512", want: 512},
		{in: "512B", want: 512},
		{in: "1KB", want: 1000},
		{in: "2MB", want: 2_000_000},
		{in: "3GB", want: 3_000_000_000},
		{in: "64KiB", want: 64 << 10},
		{in: "4MiB", want: 4 << 20},
		{in: "4 MiB", want: 4 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "8589934591GiB", want: 8589934591 << 30},
		{in: "9223372036854775807", want: math.MaxInt64},

		{in: "", wantErr: `invalid byte size "": empty`},
		{in: "-1", wantErr: `invalid byte size "-1": must not be negative`},
		{in: "-4MiB", wantErr: `invalid byte size "-4MiB": must not be negative`},
		{in: "MiB", wantErr: `invalid byte size "MiB": must start with a whole number, as in "4MiB"`},
		{in: "4mib", wantErr: `invalid byte size "4mib": unknown unit "mib" (use B, KB, MB, GB, KiB, MiB or GiB)`},
		{in: "4kb", wantErr: `unknown unit "kb"`},
		{in: "4Mi", wantErr: `unknown unit "Mi"`},
		{in: "4TiB", wantErr: `unknown unit "TiB"`},
		{in: "1.5MiB", wantErr: `invalid byte size "1.5MiB": must be a whole number; use a smaller unit`},
		{in: "+4MiB", wantErr: `must start with a whole number`},
		{in: "8589934592GiB", wantErr: `invalid byte size "8589934592GiB": too large`},
		{in: "9223372036854775808", wantErr: `too large`},
		{in: "99999999999999999999999KiB", wantErr: `too large`},
	}
	for _, tt := range tests {
		got, err := config.ParseByteSize(tt.in)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseByteSize(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
		case err != nil || got != tt.want:
			t.Errorf("ParseByteSize(%q) = %v, %v; want %d", tt.in, got, err, int64(tt.want))
		}
	}
}

func TestByteSizeStringReadsBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   config.ByteSize
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1000, "1000B"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{1536 * 1024, "1536KiB"},
		{64 << 10, "64KiB"},
		{4 << 20, "4MiB"},
		{3 << 30, "3GiB"},
		{math.MaxInt64, "9223372036854775807B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if back, err := config.ParseByteSize(tt.want); err != nil || back != tt.in {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %d", tt.want, back, err, int64(tt.in))
		}
	}
}

func TestByteSizeInYAML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		yaml    string
		want    config.ByteSize
		wantErr string
	}{
		{yaml: "1048576", want: 1 << 20},
		{yaml: "0x400", want: 1024},
		{yaml: `"2048"`, want: 2048},
		{yaml: "8MiB", want: 8 << 20},
		{yaml: `"8 MiB"`, want: 8 << 20},
		{yaml: "-1", wantErr: "line 2: requests.max_body_bytes: invalid byte size -1: must not be negative"},
		{yaml: "8mb", wantErr: `line 2: requests.max_body_bytes: invalid byte size "8mb": unknown unit "mb"`},
		{yaml: "1.5", wantErr: "line 2: requests.max_body_bytes: invalid byte size 1.5: want a whole number of bytes"},
		{yaml: "true", wantErr: "line 2: requests.max_body_bytes: invalid byte size true"},
		{yaml: "[1]", wantErr: "line 2: requests.max_body_bytes: must be a byte size such as 4194304"},
		{yaml: "9223372036854775808", wantErr: "line 2: requests.max_body_bytes: invalid byte size 9223372036854775808: too large"},
	}
	for _, tt := range tests {
		c, err := config.Parse([]byte("requests:\n  max_body_bytes: " + tt.yaml + "\n"))
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("max_body_bytes: %s: err = %v, want it to contain %q", tt.yaml, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("max_body_bytes: %s: %v", tt.yaml, err)
		case c.Requests.MaxBodyBytes != tt.want:
			t.Errorf("max_body_bytes: %s = %d, want %d", tt.yaml, int64(c.Requests.MaxBodyBytes), int64(tt.want))
		}
	}
}
