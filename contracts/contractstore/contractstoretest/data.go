// Package contractstoretest is the conformance suite of contract store
// backends (contractstore.Backend). Each backend runs it from a tiny
// _test.go file:
//
//	func TestConformance(t *testing.T) {
//		contractstoretest.Run(t, func(t *testing.T) contractstore.Backend { return openEmpty(t) })
//	}
//
// The suite writes generated batches (contracts with tags, roles and
// address parties, steps, role and address payouts, withdrawals, resets as a
// rollback makes them) and checks every read against a model of what was
// written: filters, ordering, pagination, the position each read reports,
// not-found errors, the cursor guard, and reads running during commits.
package contractstoretest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// Attribute sets the generated contracts draw from, so that filters match
// some contracts and not others.
var (
	currencies = [][]byte{{}, fill(0x11), fill(0x22)}
	tagNames   = []string{"alpha", "beta", "gamma"}
	roleNames  = []string{"buyer", "seller", "\x00\x00\x00nul"}
)

func fill(b byte) []byte {
	out := make([]byte, 28)
	for i := range out {
		out[i] = b
	}
	return out
}

func hashOf(tag byte, n uint64) chain.Hash32 {
	var in [9]byte
	in[0] = tag
	binary.BigEndian.PutUint64(in[1:], n)
	return sha256.Sum256(in[:])
}

func address(n int) string { return fmt.Sprintf("addr_test1vz%06d", n) }

func block(seq int64) chain.BlockHeader {
	return chain.BlockHeader{Slot: uint64(seq) * 10, BlockNo: uint64(seq), Hash: hashOf('b', uint64(seq))}
}

func assets(lovelace uint64) record.Assets {
	return record.Assets{Lovelace: lovelace, Tokens: map[string]map[string]json.Number{}}
}

// model is everything committed, as the reads must show it.
type model struct {
	head        contractstore.Head
	contracts   map[chain.TxOutRef]*contractstore.Contract
	tags        map[chain.TxOutRef][]string
	parties     map[chain.TxOutRef][]record.Party
	txs         map[chain.TxOutRef][]contractstore.Transaction
	payouts     map[chain.TxOutRef]*contractstore.Payout
	withdrawals []contractstore.WithdrawalRow
}

func newModel() *model {
	return &model{
		contracts: map[chain.TxOutRef]*contractstore.Contract{}, tags: map[chain.TxOutRef][]string{},
		parties: map[chain.TxOutRef][]record.Party{}, txs: map[chain.TxOutRef][]contractstore.Transaction{},
		payouts: map[chain.TxOutRef]*contractstore.Payout{},
	}
}

// apply records a commit in the model as a backend must apply it.
func (m *model) apply(p *contractstore.CommitParams) {
	for _, id := range p.Reset {
		delete(m.contracts, id)
		delete(m.tags, id)
		delete(m.parties, id)
		delete(m.txs, id)
		for ref, po := range m.payouts {
			if po.ContractID == id {
				delete(m.payouts, ref)
			}
		}
		m.withdrawals = slices.DeleteFunc(m.withdrawals, func(w contractstore.WithdrawalRow) bool { return w.ContractID == id })
	}
	for i := range p.Contracts {
		c := p.Contracts[i]
		m.contracts[c.ID] = &c
	}
	for _, t := range p.Tags {
		if !slices.Contains(m.tags[t.ContractID], t.Tag) {
			m.tags[t.ContractID] = append(m.tags[t.ContractID], t.Tag)
		}
	}
	for _, pt := range p.Parties {
		if !slices.ContainsFunc(m.parties[pt.ContractID], func(q record.Party) bool { return samePartyModel(q, pt.Party) }) {
			m.parties[pt.ContractID] = append(m.parties[pt.ContractID], pt.Party)
		}
	}
	for _, t := range p.Transactions {
		m.txs[t.ContractID] = append(m.txs[t.ContractID], t)
	}
	for i := range p.Payouts {
		po := p.Payouts[i]
		m.payouts[po.ID] = &po
	}
	for _, w := range p.PayoutsWithdrawn {
		if po, ok := m.payouts[w.ID]; ok {
			wr := w.Withdrawal
			po.Status, po.Withdrawal = contractstore.PayoutWithdrawn, &wr
		}
	}
	m.withdrawals = append(m.withdrawals, p.Withdrawals...)
	m.head = p.Head
}

func samePartyModel(a, b record.Party) bool {
	return a.Address == b.Address && string(a.RoleCurrency) == string(b.RoleCurrency) && string(a.Role) == string(b.Role)
}

// gen makes batches of activity over a growing set of contracts.
type gen struct {
	m      *model
	seq    int64
	n      int // contracts created
	open   []chain.TxOutRef
	avail  []chain.TxOutRef // role payouts not withdrawn
	rounds int
}

// next makes one batch: a few creations, steps and withdrawals.
func (g *gen) next(creates, steps, withdraws int) *contractstore.CommitParams {
	b := &batch{g: g, p: &contractstore.CommitParams{PrevSeq: g.m.head.Seq}, rows: map[chain.TxOutRef]*contractstore.Contract{}}
	b.create(creates)
	b.step(steps)
	b.withdraw(withdraws)
	return b.finish()
}

// batch is one generated commit: its params and the contracts it changes.
type batch struct {
	g    *gen
	p    *contractstore.CommitParams
	rows map[chain.TxOutRef]*contractstore.Contract
}

// row returns the batch's copy of a contract of the model.
func (b *batch) row(id chain.TxOutRef) *contractstore.Contract {
	if c, ok := b.rows[id]; ok {
		return c
	}
	c := *b.g.m.contracts[id]
	body := *c.Body
	body.Payouts = slices.Clone(body.Payouts)
	c.Body = &body
	b.rows[id] = &c
	return &c
}

// create adds n contracts.
func (b *batch) create(creates int) {
	g, p, rows := b.g, b.p, b.rows
	for range creates {
		g.seq++
		g.n++
		n := g.n
		id := chain.TxOutRef{TxID: hashOf('c', uint64(n)), Index: uint32(n % 3)}
		rc := currencies[n%len(currencies)]
		tags := map[string]json.RawMessage{tagNames[n%3]: json.RawMessage("null")}
		if n%4 == 0 {
			tags[tagNames[(n+1)%3]] = json.RawMessage(`{"n":1}`)
		}
		tagsJSON, _ := json.Marshal(tags)
		c := &contractstore.Contract{
			ID: id, Seq: g.seq, Block: block(g.seq), Version: "v" + fmt.Sprint(1+n%5), RolesCurrency: rc,
			Address: "addr_test1wz" + fmt.Sprint(n), Tags: tagsJSON, Metadata: json.RawMessage(`{"1564":[2,[]]}`),
			Status: contractstore.StatusOpen, LastSeq: g.seq, LastBlock: block(g.seq),
			Body: &contractstore.ContractBody{
				InitialContract: json.RawMessage(`"close"`), InitialState: json.RawMessage(`{"minTime":0}`),
				Contract: json.RawMessage(`{"when":[],"timeout":1,"timeout_continuation":"close"}`),
				State:    json.RawMessage(`{"minTime":0}`), UTxO: &id, Assets: assets(uint64(n) * 1000),
				Payouts: []contractstore.PayoutSummary{},
			},
		}
		rows[id] = c
		for t := range tags {
			p.Tags = append(p.Tags, contractstore.ContractTag{ContractID: id, Seq: g.seq, Tag: t})
		}
		p.Parties = append(p.Parties,
			contractstore.ContractParty{ContractID: id, Seq: g.seq, Party: record.Party{Address: address(n % 7)}},
			contractstore.ContractParty{ContractID: id, Seq: g.seq, Party: record.Party{RoleCurrency: rc, Role: []byte(roleNames[n%3])}})
		g.open = append(g.open, id)
	}
}

// step applies (or rejects) inputs to n open contracts in turn, with a
// role payout and an address payout per applied step.
func (b *batch) step(steps int) {
	g, p, row := b.g, b.p, b.row
	for i := 0; i < steps && len(g.open) > 0; i++ {
		g.seq++
		g.rounds++
		k := g.rounds % len(g.open)
		id := g.open[k]
		c := row(id)
		tx := hashOf('t', uint64(g.seq))
		closed := g.rounds%3 == 0
		t := contractstore.Transaction{ContractID: id, TxID: tx, Seq: g.seq, Block: block(g.seq), Kind: contractstore.TxApplied,
			Input: *c.Body.UTxO, Closed: closed, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, g.seq))}
		if g.rounds%5 == 4 {
			t.Kind, t.Reason, t.Closed = contractstore.TxRejected, "redeemer: bad", false
			closed = false
		} else if !closed {
			out := chain.TxOutRef{TxID: tx, Index: 0}
			t.Output, c.Body.UTxO = &out, &out
		}
		// One role payout and one address payout per applied step.
		if t.Kind == contractstore.TxApplied {
			role := roleNames[g.rounds%3]
			addr := address(g.rounds % 7)
			for j, po := range []contractstore.Payout{
				{Role: &role, RolesCurrency: c.RolesCurrency, Status: contractstore.PayoutAvailable, ValidatorAddress: address(g.rounds % 5)},
				{Address: &addr, RolesCurrency: []byte{}, Status: contractstore.PayoutPaid},
			} {
				po.ID = chain.TxOutRef{TxID: tx, Index: uint32(1 + j)}
				po.ContractID, po.TxID, po.Seq, po.Block, po.Assets = id, tx, g.seq, block(g.seq), assets(uint64(g.seq))
				p.Payouts = append(p.Payouts, po)
				c.Body.Payouts = append(c.Body.Payouts, contractstore.PayoutSummary{ID: po.ID, Role: po.Role, Address: po.Address,
					Assets: po.Assets, Status: po.Status})
				if po.Role != nil {
					g.avail = append(g.avail, po.ID)
				}
			}
		}
		if closed {
			c.Status, c.Body.UTxO, c.Body.Contract, c.Body.State = contractstore.StatusClosed, nil, json.RawMessage("null"), json.RawMessage("null")
			g.open = slices.Delete(g.open, k, k+1)
		}
		c.Steps++
		c.LastSeq, c.LastBlock = g.seq, block(g.seq)
		p.Transactions = append(p.Transactions, t)
	}
}

// withdraw makes n withdrawals: one transaction takes the two oldest
// available payouts (of one or two contracts; payouts of the same batch
// are not taken).
func (b *batch) withdraw(withdraws int) {
	g, p, row := b.g, b.p, b.row
	for i := 0; i < withdraws && len(g.avail) >= 2; i++ {
		tx := hashOf('w', uint64(g.seq+1))
		taken := g.avail[:2]
		var done []chain.TxOutRef
		for _, ref := range taken {
			po, ok := g.m.payouts[ref]
			if !ok {
				continue // made in this batch
			}
			g.seq++
			p.PayoutsWithdrawn = append(p.PayoutsWithdrawn, contractstore.PayoutWithdrawal{ID: ref,
				Withdrawal: contractstore.WithdrawalRef{TxID: tx, Seq: g.seq, Block: block(g.seq)}})
			p.Withdrawals = append(p.Withdrawals, contractstore.WithdrawalRow{TxID: tx, ContractID: po.ContractID, Seq: g.seq, Block: block(g.seq)})
			c := row(po.ContractID)
			for k := range c.Body.Payouts {
				if c.Body.Payouts[k].ID == ref {
					c.Body.Payouts[k].Status, c.Body.Payouts[k].Withdrawal = contractstore.PayoutWithdrawn, &tx
				}
			}
			c.LastSeq, c.LastBlock = g.seq, block(g.seq)
			done = append(done, ref)
		}
		g.avail = slices.DeleteFunc(g.avail, func(r chain.TxOutRef) bool { return slices.Contains(done, r) })
	}
}

// finish adds the changed contracts and the head to the params.
func (b *batch) finish() *contractstore.CommitParams {
	g, p, rows := b.g, b.p, b.rows
	open := g.m.head.OpenContracts
	total := g.m.head.Contracts
	for id, c := range rows {
		if old, ok := g.m.contracts[id]; ok {
			total--
			if old.Status == contractstore.StatusOpen {
				open--
			}
		}
		total++
		if c.Status == contractstore.StatusOpen {
			open++
		}
		p.Contracts = append(p.Contracts, *c)
	}
	slices.SortFunc(p.Contracts, func(a, b contractstore.Contract) int { return int(a.Seq - b.Seq) })
	g.seq++ // every batch ends on a seq of its own, as a batch ending on a marker does
	p.Head = contractstore.Head{Position: contractstore.Position{Seq: g.seq, Block: block(g.seq)}, Contracts: total, OpenContracts: open}
	return p
}
