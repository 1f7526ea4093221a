package historytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// BenchRollbackDepth is how many blocks of UTxO changes the benchmarks
// keep (mainnet's security parameter): past it, every commit prunes.
const BenchRollbackDepth = 2160

// benchPayload is a record payload of about 600 bytes, the size of a
// Marlowe step with a few inputs and payouts in core JSON.
var benchPayload = func() string {
	var sb strings.Builder
	sb.WriteString(`{"inputs":[`)
	for i := range 4 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"input_from_party":{"role_token":"party%d"},"that_deposits":%d,"of_token":{"currency_symbol":"","token_name":""},"into_account":{"address":"addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgs68faae"}}`, i, 1000000*(i+1))
	}
	sb.WriteString(`],"invalidBefore":1700000000000,"invalidHereafter":1700000600000}`)
	return sb.String()
}()

// benchDatum is a contract output's datum: a small MarloweData.
var benchDatum = bytes.Repeat([]byte{0xd8, 0x79, 0x9f, 0x01}, 100)

// benchChain makes a steady chain for the benchmarks: every block creates
// a contract (an index entry with tags and parties, a tracked output) and
// applies inputs to the one created in the block before (its output spent,
// a continuation tracked): two records per block.
type benchChain struct {
	seq     int64
	block   uint64
	headers []chain.BlockHeader // the newest blocks, newest last
}

func (c *benchChain) header(n uint64) chain.BlockHeader {
	return chain.BlockHeader{Slot: n * 20, BlockNo: n, Hash: hashOf('H', n, 0, 0)}
}

// add appends the next blocks to p and completes its checkpoint.
func (c *benchChain) add(p *history.CommitParams, blocks int) {
	for range blocks {
		c.block++
		h := c.header(c.block)
		created := chain.TxOutRef{TxID: hashOf('K', c.block, 0, 0)}
		prev := chain.TxOutRef{TxID: hashOf('K', c.block-1, 0, 0)}
		step := chain.TxOutRef{TxID: hashOf('S', c.block, 0, 0)}
		cur := currencies[1+c.block%3]
		c.seq++
		p.Records = append(p.Records, record.Record{Seq: c.seq, Kind: record.KindContractCreated, Block: h,
			TxID: created.TxID, Contract: &created, Payload: json.RawMessage(benchPayload)})
		p.Contracts = append(p.Contracts, record.ContractIndex{ID: created, Version: "v3", RolesCurrency: cur,
			Tags: []string{tagNames[c.block%4]}, CreatedSeq: c.seq, Block: h,
			Parties: []record.Party{{Address: address(int(c.block % 1000))}, {RoleCurrency: cur, Role: roleNames[0]},
				{RoleCurrency: cur, Role: roleNames[1]}}})
		ch := classify.UTxOChanges{Block: h, Added: []classify.TrackedUTxO{{Ref: created, Kind: classify.KindContract,
			ContractID: created, Version: "v3", Address: []byte{0x70, 1, 2, 3}, RolesCurrency: cur, Datum: benchDatum}}}
		if c.block > 1 {
			c.seq++
			p.Records = append(p.Records, record.Record{Seq: c.seq, Kind: record.KindInputsApplied, Block: h,
				TxID: step.TxID, TxIndex: 1, Contract: &prev, Payload: json.RawMessage(benchPayload)})
			ch.Removed = []classify.TrackedUTxO{{Ref: prev, Kind: classify.KindContract, ContractID: prev, Version: "v3",
				Address: []byte{0x70, 1, 2, 3}, Datum: benchDatum}}
			ch.Added = append(ch.Added, classify.TrackedUTxO{Ref: step, Kind: classify.KindContract, ContractID: prev,
				Version: "v3", Address: []byte{0x70, 1, 2, 3}, Datum: benchDatum})
		}
		p.Checkpoint.UTxO = append(p.Checkpoint.UTxO, history.UTxOStep{Forward: &ch})
		c.headers = append(c.headers, h)
	}
	if len(c.headers) > 10 {
		c.headers = c.headers[len(c.headers)-10:]
	}
	for i := len(c.headers) - 1; i >= 0; i-- {
		p.Checkpoint.Breadcrumbs = append(p.Checkpoint.Breadcrumbs, c.headers[i])
	}
	p.Checkpoint.Tip = chain.Tip{Point: c.header(c.block).Point(), BlockNo: c.block}
	if c.block > BenchRollbackDepth {
		p.Checkpoint.Horizon = c.header(c.block - BenchRollbackDepth)
	}
}

// benchBackend opens and initializes a backend closed when b ends.
func benchBackend(b *testing.B, open func(tb testing.TB) history.Backend) history.Backend {
	be := open(b)
	b.Cleanup(func() { _ = be.Close() })
	if err := be.Init(context.Background(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
		b.Fatalf("init: %v", err)
	}
	return be
}

// BenchCommit measures commits of blocksPerCommit blocks each (1 at the
// tip, hundreds while syncing), two records a block, with the contract
// index, UTxO changes, breadcrumbs and horizon of a real batch. It reports
// records/s and blocks/s.
func BenchCommit(b *testing.B, open func(tb testing.TB) history.Backend, blocksPerCommit int) {
	be := benchBackend(b, open)
	c := &benchChain{}
	// Start past the rollback depth, so that every commit prunes.
	for c.block < BenchRollbackDepth+10 {
		p := &history.CommitParams{}
		c.add(p, 500)
		if err := be.Commit(context.Background(), p); err != nil {
			b.Fatalf("commit: %v", err)
		}
	}
	seq0, block0 := c.seq, c.block
	for b.Loop() {
		p := &history.CommitParams{}
		c.add(p, blocksPerCommit)
		if err := be.Commit(context.Background(), p); err != nil {
			b.Fatalf("commit: %v", err)
		}
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(c.seq-seq0)/secs, "records/s")
	b.ReportMetric(float64(c.block-block0)/secs, "blocks/s")
}

// BenchListParams select what BenchRecordList reads.
type BenchListParams struct {
	Page   int // records a page
	Mode   record.Mode
	Filter record.Filter // see BenchTag
}

// BenchTag is the tag of one contract in four of the benchmark chain: a
// filter on it matches a quarter of the records, by index.
const BenchTag = "alpha"

// BenchRecordList measures catch-up: a reader paging through a log of
// 100,000 records (two a block, a contract created in each block) from the
// start to the head. It reports the records read per second.
func BenchRecordList(b *testing.B, open func(tb testing.TB) history.Backend, bp BenchListParams) {
	be := benchBackend(b, open)
	c := &benchChain{}
	for c.seq < 100_000 {
		p := &history.CommitParams{}
		c.add(p, 1000)
		if err := be.Commit(context.Background(), p); err != nil {
			b.Fatalf("commit: %v", err)
		}
	}
	read := 0
	for b.Loop() {
		p := record.RecordListParams{Limit: bp.Page, Mode: bp.Mode, Snapshot: c.seq, Filter: bp.Filter}
		for {
			recs, err := be.RecordList(context.Background(), &p)
			if err != nil {
				b.Fatalf("record list: %v", err)
			}
			read += len(recs)
			if len(recs) < bp.Page {
				break
			}
			p.After = recs[len(recs)-1].Seq
		}
	}
	b.ReportMetric(float64(read)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkCommit runs BenchCommit with one block a commit (at the tip)
// and 500 (syncing): a backend's BenchmarkCommit.
func BenchmarkCommit[B history.Backend](b *testing.B, open func(tb testing.TB) B) {
	for _, blocks := range []int{1, 500} {
		b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) { BenchCommit(b, opener(open), blocks) })
	}
}

// BenchmarkRecordList runs BenchRecordList, catch-up through 100,000
// records, over the log and a snapshot in pages of 1,000 and 10,000, and
// over the log with a tag's filter: a backend's BenchmarkRecordList.
func BenchmarkRecordList[B history.Backend](b *testing.B, open func(tb testing.TB) B) {
	tag := record.Filter{Tags: []string{BenchTag}}
	for _, c := range []struct {
		name string
		p    BenchListParams
	}{
		{"log/page=1000", BenchListParams{Page: 1000}},
		{"log/page=10000", BenchListParams{Page: 10000}},
		{"snapshot/page=1000", BenchListParams{Page: 1000, Mode: record.ModeSnapshot}},
		{"snapshot/page=10000", BenchListParams{Page: 10000, Mode: record.ModeSnapshot}},
		{"log/tag/page=1000", BenchListParams{Page: 1000, Filter: tag}},
	} {
		b.Run(c.name, func(b *testing.B) { BenchRecordList(b, opener(open), c.p) })
	}
}
