package processor

import "testing"

// TestMetadataMapKeys checks map keys as cardano-cli shows them: a byte
// string key is "0x" and hex (not the JSON string "\"0x...\""), so a 32-byte
// key stays within the 66 characters clients such as the Marlowe TS SDK
// accept, as the Marlowe Runtime's does.
func TestMetadataMapKeys(t *testing.T) {
	// {h'0102': 1, 7: 2, "k": 3, [1, 2]: "x"}
	got := string(MetadatumJSON(mustHex(t, "a4420102010702616b038201026178")))
	want := `{"0x0102":1,"7":2,"[1,2]":"x","k":3}`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
