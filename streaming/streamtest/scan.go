package streamtest

import (
	"bytes"
	"strconv"
)

// The frames of a subscriber that reads them without decoding them (the
// benchmarks' bare WebSocket clients, so that the figures are the
// server's): the commands it sends, and what it takes out of a frame's
// text.

var (
	batchPrefix      = []byte(`{"type":"batch"`)
	subscribedPrefix = []byte(`{"type":"subscribed"`)
	errorPrefix      = []byte(`{"type":"error"`)
	batchKey         = []byte(`"batch":`)
	recordKey        = []byte(`{"seq":`)
	blockNoKey       = []byte(`"blockNo":`)
)

// SubscribeAll is the text of a subscribe to every record of stream from
// from.
func SubscribeAll(stream, from string) []byte {
	return []byte(`{"type":"subscribe","stream":"` + stream + `","from":"` + from + `","filter":{"all":true}}`)
}

// AckText is the text of the ack of batch on stream.
func AckText(stream string, batch int64) []byte {
	return []byte(`{"type":"ack","stream":"` + stream + `","batch":` + strconv.FormatInt(batch, 10) + `}`)
}

// FrameKind is the type a frame's text begins with: "batch", "subscribed",
// "error", or "" for any other.
func FrameKind(data []byte) string {
	switch {
	case bytes.HasPrefix(data, batchPrefix):
		return "batch"
	case bytes.HasPrefix(data, subscribedPrefix):
		return "subscribed"
	case bytes.HasPrefix(data, errorPrefix):
		return "error"
	}
	return ""
}

// ScanRecords calls each with the seq and the block number of each record
// of a batch frame's text, in order, and returns how many it found. Each
// record begins with its seq; its block (slot, then number) comes before
// its payload. The tip, after the records, has its seq after other fields.
// A payload holding an object that begins with "seq" would be taken for a
// record: the payloads' Marlowe core JSON has no such key.
func ScanRecords(data []byte, each func(seq int64, blockNo uint64)) int {
	records := 0
	for rest := data; ; {
		k := bytes.Index(rest, recordKey)
		if k < 0 {
			return records
		}
		rest = rest[k+len(recordKey):]
		seq := LeadingDigits(rest)
		k = bytes.Index(rest, blockNoKey)
		if k < 0 {
			return records
		}
		rest = rest[k+len(blockNoKey):]
		each(seq, uint64(LeadingDigits(rest)))
		records++
	}
}

// BatchNumber is the batch number of a batch frame's text (false when it
// has none).
func BatchNumber(data []byte) (int64, bool) {
	k := bytes.Index(data, batchKey)
	if k < 0 {
		return 0, false
	}
	return LeadingDigits(data[k+len(batchKey):]), true
}
