package client

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
			defer reportCPU(b, cpuNow())
			for range b.N {
				if err := d.decode(data, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("records="+strconv.Itoa(n)+"/decoder=encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			defer reportCPU(b, cpuNow())
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
func corpusRecords(tb testing.TB) [][]byte {
	files, _ := filepath.Glob("testdata/fuzz/FuzzDecodeFrame/server-*")
	var out [][]byte
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		_, quoted, _ := bytes.Cut(bytes.TrimSpace(raw), []byte("[]byte("))
		text, err := strconv.Unquote(string(bytes.TrimSuffix(quoted, []byte(")"))))
		if err != nil {
			tb.Fatal(err)
		}
		f, err := decodeFrame([]byte(text), 0)
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range f.raw {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		tb.Fatal("no records in the corpus")
	}
	return out
}

// BenchmarkSkip steps over the records of the fuzz corpus (real records of
// the server, payloads and all) as the decoder steps over a payload:
// skipWellFormed, its one loop, against skipValue, the checking loop it
// falls back on, in the same run.
func BenchmarkSkip(b *testing.B) {
	records := corpusRecords(b)
	size := 0
	for _, r := range records {
		size += len(r)
	}
	b.Run("skip=wellFormed", func(b *testing.B) {
		b.SetBytes(int64(size))
		defer reportCPU(b, cpuNow())
		for range b.N {
			for _, r := range records {
				if end, ok := skipWellFormed(r, 0); !ok || end != len(r) {
					b.Fatalf("skipWellFormed: %d, %v of %d bytes", end, ok, len(r))
				}
			}
		}
	})
	b.Run("skip=checked", func(b *testing.B) {
		b.SetBytes(int64(size))
		var s scanner
		defer reportCPU(b, cpuNow())
		for range b.N {
			for _, r := range records {
				s.b, s.i = r, 0
				if err := s.skipValue(); err != nil || s.i != len(r) {
					b.Fatalf("skipValue: %d, %v of %d bytes", s.i, err, len(r))
				}
			}
		}
	})
}

// reportCPU reports the process's CPU time per operation since cpu0: on a
// shared machine, what the code took rather than how long it waited for a
// core.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64((cpuNow()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
