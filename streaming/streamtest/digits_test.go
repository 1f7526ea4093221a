package streamtest

import "testing"

func TestLeadingDigits(t *testing.T) {
	for in, want := range map[string]int64{`1234,"x":5`: 1234, `7}`: 7, `0`: 0, `,1`: 0, ``: 0, `90071992547409`: 90071992547409} {
		if got := LeadingDigits([]byte(in)); got != want {
			t.Errorf("LeadingDigits(%q) = %d, want %d", in, got, want)
		}
	}
}
