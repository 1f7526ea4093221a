package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/contractstoretest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/record/filtercases"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
	"github.com/marlowe-follower/follower/query"
)

// TestFilterCases runs the filter vocabulary's table (history/record/
// filtercases) against the contract lists of both APIs, over the contract
// store's SQL on both databases: GET /contracts with each case's query
// string, and GET /runtime/contracts with those of its cases that use
// only names the Runtime has (no contractId, no status).
func TestFilterCases(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			var b contractstore.Backend
			if backend == "sqlite" {
				b = contractstoretest.OpenSQLite(t, t.TempDir())
			} else {
				url := storagetest.PostgresURL(t)
				b = contractstoretest.OpenPostgres(t, url, storagetest.NewSchema(t, url, "cvtest"))
			}
			t.Cleanup(func() { b.Close() })
			head := commitFilterContracts(t, b)
			f := serveStore(t, b, head)
			for _, c := range filtercases.Cases() {
				t.Run(c.Name, func(t *testing.T) {
					f := f.at(t)
					q := c.Params.Encode()
					var page struct {
						Results []struct {
							ContractID string `json:"contractId"`
						} `json:"results"`
					}
					f.get("/contracts?"+q, http.StatusOK).decode(t, &page)
					var ids []chain.TxOutRef
					for _, r := range page.Results {
						ids = append(ids, mustRef(t, r.ContractID))
					}
					if got := filtercases.Selected(ids); !slices.Equal(got, c.Want) {
						t.Fatalf("GET /contracts?%s: %v, want %v", q, got, c.Want)
					}
					if c.Uses(filtercases.NameContractID) || c.Uses(filtercases.NameStatus) {
						return
					}
					var rt rtList[rtContract]
					f.rtGet("/contracts?"+q, http.Header{"Range": {"contractId;order asc"}}, http.StatusPartialContent).decode(t, &rt)
					ids = ids[:0]
					for _, r := range rt.Results {
						ids = append(ids, mustRef(t, r.Resource.ContractID))
					}
					if got := filtercases.Selected(ids); !slices.Equal(got, c.Want) {
						t.Fatalf("GET /runtime/contracts?%s: %v, want %v", q, got, c.Want)
					}
				})
			}
		})
	}
}

func mustRef(t *testing.T, s string) chain.TxOutRef {
	t.Helper()
	ref, err := chain.ParseTxOutRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// commitFilterContracts commits the table's contracts as the projection
// would have, and returns the head.
func commitFilterContracts(t *testing.T, b contractstore.Backend) contractstore.Head {
	p := &contractstore.CommitParams{}
	for i := range filtercases.Contracts {
		c := &filtercases.Contracts[i]
		seq := int64(i + 1)
		blk := chain.BlockHeader{Slot: uint64(seq) * 10, BlockNo: uint64(seq), Hash: chain.Hash32{byte(seq)}}
		status := contractstore.StatusClosed
		if c.Open {
			status = contractstore.StatusOpen
			p.Head.OpenContracts++
		}
		p.Head.Contracts++
		tags := map[string]json.RawMessage{}
		for _, tag := range c.Tags {
			tags[tag] = json.RawMessage("null")
			p.Tags = append(p.Tags, contractstore.ContractTag{ContractID: c.ID, Seq: seq, Tag: tag})
		}
		tagJSON, err := json.Marshal(tags)
		must(t, err)
		for _, party := range c.Parties {
			p.Parties = append(p.Parties, contractstore.ContractParty{ContractID: c.ID, Seq: seq, Party: party})
		}
		p.Contracts = append(p.Contracts, contractstore.Contract{ID: c.ID, Seq: seq, Block: blk, Version: "v5",
			RolesCurrency: c.RolesCurrency, Address: "addr_test1wqmhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg03kpfs",
			Tags: tagJSON, Metadata: json.RawMessage("{}"), Status: status, LastSeq: seq, LastBlock: blk,
			Body: &contractstore.ContractBody{InitialContract: json.RawMessage(`"close"`), InitialState: json.RawMessage(`{}`),
				Contract: json.RawMessage("null"), State: json.RawMessage("null"),
				Assets: record.Assets{Tokens: map[string]map[string]json.Number{}}, Payouts: []contractstore.PayoutSummary{}}})
		p.Head.Position = contractstore.Position{Seq: seq, Block: blk}
	}
	must(t, b.Commit(context.Background(), p))
	return p.Head
}

// fixedProjection is a projection that has applied head and waits for
// nothing more.
type fixedProjection struct{ at contractstore.Position }

func (p fixedProjection) Applied() contractstore.Position { return p.at }
func (p fixedProjection) WaitFor(ctx context.Context, seq int64) error {
	if seq > p.at.Seq {
		return fmt.Errorf("seq %d is beyond the store's %d", seq, p.at.Seq)
	}
	return nil
}

// noHistory is a history without records (these tests read contracts only).
type noHistory struct{}

func (noHistory) Head() int64 { return 0 }
func (noHistory) RecordList(context.Context, *record.RecordListParams) ([]record.Record, error) {
	return nil, nil
}
func (noHistory) RecordGet(context.Context, int64) (*record.Record, error) {
	return nil, record.ErrNotFound
}
func (noHistory) ContractGet(context.Context, chain.TxOutRef) (*record.ContractIndex, error) {
	return nil, record.ErrNotFound
}

// serveStore serves both APIs over a contract store.
func serveStore(t testing.TB, b contractstore.Backend, head contractstore.Head) *fixture {
	return serveConfig(t, query.Config{Addr: "127.0.0.1:0", Contracts: b, History: noHistory{},
		Projection: fixedProjection{head.Position}, Slots: &devnetSlots,
		Status: func() query.Status { return query.Status{Network: "devnet", NetworkMagic: 42, Version: "test"} }})
}
