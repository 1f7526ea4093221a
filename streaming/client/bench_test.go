package client

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/streaming/protocol"
)

// BenchmarkDecodeFrame decodes batch frames of 1 and 200 records made of
// the devnet's records in the fuzz corpus (real frames of the server):
// the client's decoder against encoding/json decoding the whole protocol.Frame, as
// the client did before, in the same run.
func BenchmarkDecodeFrame(b *testing.B) {
	records := corpusRecords(b)
	for _, n := range []int{1, 200} {
		var sb strings.Builder
		sb.WriteString(`{"type":"batch","stream":"all","batch":7,"records":[`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.Write(records[i%len(records)])
		}
		sb.WriteString(`],"cursor":"` + strconv.Itoa(n) + `","tip":{"slot":1,"blockNo":2,"seq":3}}`)
		data := []byte(sb.String())
		b.Run("records="+strconv.Itoa(n)+"/decoder=client", func(b *testing.B) {
			// One decoder for the frames, as a connection has.
			var d decoder
			var f frame
			b.SetBytes(int64(len(data)))
			for range b.N {
				if err := d.decode(data, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("records="+strconv.Itoa(n)+"/decoder=encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				var f protocol.Frame
				if err := json.Unmarshal(data, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// corpusRecords returns the records of the batch frames in the fuzz corpus.
func corpusRecords(b *testing.B) [][]byte {
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeFrame/server-*")
	var out [][]byte
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		_, quoted, _ := bytes.Cut(bytes.TrimSpace(raw), []byte("[]byte("))
		text, err := strconv.Unquote(string(bytes.TrimSuffix(quoted, []byte(")"))))
		if err != nil {
			b.Fatal(err)
		}
		f, err := decodeFrame([]byte(text), 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range f.raw {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		b.Fatal("no records in the corpus")
	}
	return out
}
