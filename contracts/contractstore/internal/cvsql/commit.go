package cvsql

import (
	"strings"
	"unicode/utf8"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// maxParams bounds the parameters of one multi-row statement (SQLite's
// limit is 32,766, PostgreSQL's 65,535).
const maxParams = 30000

// resetTables are the tables whose rows belong to one contract.
var resetTables = []string{"cv_contract_tags", "cv_contract_parties", "cv_transactions", "cv_payouts", "cv_withdrawals",
	"cv_source_links", "cv_contracts"}

// orphanSources delete the sources no contract links any more (after a
// reset deleted links): a scan of the sources, each probed in the links'
// hash index, on commits with resets only (rollbacks).
var orphanSources = []Stmt{
	{SQL: `DELETE FROM cv_sources WHERE NOT EXISTS (SELECT 1 FROM cv_source_links l WHERE l.hash = cv_sources.hash)`, Want: -1},
	{SQL: `DELETE FROM cv_source_refs WHERE NOT EXISTS (SELECT 1 FROM cv_sources s WHERE s.hash = cv_source_refs.hash)`, Want: -1},
}

// BuildCommit turns a batch into statements, run in order in one
// transaction: the cursor guard first, then the resets, the upserts and
// inserts, the payout updates, and the new cursor.
func BuildCommit(p *contractstore.CommitParams) []Stmt {
	out := []Stmt{{SQL: `UPDATE cv_head SET seq = seq WHERE id = 1 AND seq = ?`, Args: []any{p.PrevSeq}, Want: 1}}
	if len(p.Reset) > 0 {
		for _, table := range resetTables {
			out = append(out, chunked(len(p.Reset), 1, func(n int) string {
				return "DELETE FROM " + table + " WHERE contract_id IN (" + marks(n, 1) + ")"
			}, func(i int) []any { return []any{RefBytes(p.Reset[i])} })...)
		}
		out = append(out, orphanSources...)
	}
	if len(p.Contracts) > 0 {
		out = append(out, chunked(len(p.Contracts), 17, func(n int) string {
			return `INSERT INTO cv_contracts (contract_id, created_seq, slot, block_no, block_hash, version, roles_currency,
				address, tags, metadata, status, steps, last_seq, last_slot, last_block_no, last_block_hash, body)
				VALUES ` + marks(n, 17) + ` ON CONFLICT (contract_id) DO UPDATE SET created_seq = excluded.created_seq,
				slot = excluded.slot, block_no = excluded.block_no, block_hash = excluded.block_hash,
				version = excluded.version, roles_currency = excluded.roles_currency, address = excluded.address,
				tags = excluded.tags, metadata = excluded.metadata, status = excluded.status, steps = excluded.steps,
				last_seq = excluded.last_seq, last_slot = excluded.last_slot, last_block_no = excluded.last_block_no,
				last_block_hash = excluded.last_block_hash, body = excluded.body`
		}, func(i int) []any { return contractArgs(&p.Contracts[i]) })...)
	}
	if len(p.Tags) > 0 {
		out = append(out, chunked(len(p.Tags), 3, func(n int) string {
			return `INSERT INTO cv_contract_tags (contract_id, tag, created_seq) VALUES ` + marks(n, 3) +
				` ON CONFLICT (contract_id, tag) DO NOTHING`
		}, func(i int) []any {
			t := &p.Tags[i]
			return []any{RefBytes(t.ContractID), []byte(t.Tag), t.Seq}
		})...)
	}
	if len(p.Parties) > 0 {
		out = append(out, chunked(len(p.Parties), 6, func(n int) string {
			return `INSERT INTO cv_contract_parties (contract_id, party_key, address, role_currency, role_name, created_seq) VALUES ` +
				marks(n, 6) + ` ON CONFLICT (contract_id, party_key) DO NOTHING`
		}, func(i int) []any { return partyArgs(&p.Parties[i]) })...)
	}
	if len(p.Transactions) > 0 {
		out = append(out, chunked(len(p.Transactions), 12, func(n int) string {
			return `INSERT INTO cv_transactions (contract_id, tx_id, seq, slot, block_no, block_hash, kind, input, output,
				closed, reason, payload) VALUES ` + marks(n, 12)
		}, func(i int) []any { return transactionArgs(&p.Transactions[i]) })...)
	}
	if len(p.Payouts) > 0 {
		out = append(out, chunked(len(p.Payouts), 18, func(n int) string {
			return `INSERT INTO cv_payouts (payout_id, contract_id, tx_id, seq, slot, block_no, block_hash, roles_currency,
				role, address, assets, status, withdrawal_tx, withdrawal_seq, withdrawal_slot, withdrawal_block_no,
				withdrawal_block_hash, validator_address) VALUES ` + marks(n, 18)
		}, func(i int) []any { return payoutArgs(&p.Payouts[i]) })...)
	}
	for i := range p.PayoutsWithdrawn {
		w := &p.PayoutsWithdrawn[i]
		args := []any{NonNil(append([]byte(nil), w.Withdrawal.TxID[:]...)), w.Withdrawal.Seq}
		args = append(args, blockArgs(w.Withdrawal.Block)...)
		args = append(args, RefBytes(w.ID))
		out = append(out, Stmt{SQL: `UPDATE cv_payouts SET status = 'withdrawn', withdrawal_tx = ?, withdrawal_seq = ?,
			withdrawal_slot = ?, withdrawal_block_no = ?, withdrawal_block_hash = ? WHERE payout_id = ?`, Args: args, Want: -1})
	}
	if len(p.Withdrawals) > 0 {
		out = append(out, chunked(len(p.Withdrawals), 6, func(n int) string {
			return `INSERT INTO cv_withdrawals (tx_id, contract_id, seq, slot, block_no, block_hash) VALUES ` + marks(n, 6)
		}, func(i int) []any {
			w := &p.Withdrawals[i]
			return append([]any{append([]byte(nil), w.TxID[:]...), RefBytes(w.ContractID), w.Seq}, blockArgs(w.Block)...)
		})...)
	}
	out = append(out, sourceStmts(p)...)
	h := p.Head
	args := append([]any{h.Seq}, blockArgs(h.Block)...)
	args = append(args, h.Contracts, h.OpenContracts)
	out = append(out, Stmt{SQL: `UPDATE cv_head SET seq = ?, slot = ?, block_no = ?, block_hash = ?, contracts = ?,
		open_contracts = ? WHERE id = 1`, Args: args, Want: 1})
	return out
}

// sourceStmts insert a commit's sources, their references and links, each
// unless stored.
func sourceStmts(p *contractstore.CommitParams) []Stmt {
	var out []Stmt
	if len(p.Sources) > 0 {
		out = append(out, chunked(len(p.Sources), 2, func(n int) string {
			return `INSERT INTO cv_sources (hash, contract) VALUES ` + marks(n, 2) + ` ON CONFLICT (hash) DO NOTHING`
		}, func(i int) []any {
			src := &p.Sources[i]
			return []any{append([]byte(nil), src.Hash[:]...), jsonText(src.Contract)}
		})...)
		type ref struct{ hash, ref chain.Hash32 }
		var refs []ref
		for i := range p.Sources {
			for _, r := range p.Sources[i].Refs {
				refs = append(refs, ref{p.Sources[i].Hash, r})
			}
		}
		if len(refs) > 0 {
			out = append(out, chunked(len(refs), 2, func(n int) string {
				return `INSERT INTO cv_source_refs (hash, ref) VALUES ` + marks(n, 2) + ` ON CONFLICT (hash, ref) DO NOTHING`
			}, func(i int) []any {
				return []any{append([]byte(nil), refs[i].hash[:]...), append([]byte(nil), refs[i].ref[:]...)}
			})...)
		}
	}
	if len(p.SourceLinks) > 0 {
		out = append(out, chunked(len(p.SourceLinks), 4, func(n int) string {
			return `INSERT INTO cv_source_links (contract_id, hash, tx_id, seq) VALUES ` + marks(n, 4) +
				` ON CONFLICT (contract_id, hash) DO NOTHING`
		}, func(i int) []any {
			l := &p.SourceLinks[i]
			return []any{RefBytes(l.ContractID), append([]byte(nil), l.Hash[:]...), append([]byte(nil), l.TxID[:]...), l.Seq}
		})...)
	}
	return out
}

// chunked makes multi-row statements of at most maxParams parameters.
func chunked(rows, cols int, sql func(n int) string, args func(i int) []any) []Stmt {
	per := max(1, maxParams/cols)
	var out []Stmt
	for start := 0; start < rows; start += per {
		end := min(rows, start+per)
		st := Stmt{SQL: sql(end - start), Want: -1, Args: make([]any, 0, (end-start)*cols)}
		for i := start; i < end; i++ {
			st.Args = append(st.Args, args(i)...)
		}
		out = append(out, st)
	}
	return out
}

// marks returns n groups of cols placeholders: "(?, ?), (?, ?)"; with cols
// 1, a plain list "?, ?".
func marks(n, cols int) string {
	var b strings.Builder
	group := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	if cols == 1 {
		group = "?"
	}
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(group)
	}
	return b.String()
}

func contractArgs(c *contractstore.Contract) []any {
	args := []any{RefBytes(c.ID), c.Seq}
	args = append(args, blockArgs(c.Block)...)
	args = append(args, c.Version, NonNil(c.RolesCurrency), c.Address, jsonText(c.Tags), jsonText(c.Metadata),
		string(c.Status), int64(c.Steps), c.LastSeq)
	args = append(args, blockArgs(c.LastBlock)...)
	body := "null"
	if c.Body != nil {
		body = mustJSON(c.Body)
	}
	return append(args, body)
}

// PartyKey tells parties of one contract apart: "a" and the address, or
// "r", the roles currency and the role name.
func PartyKey(p *contractstore.ContractParty) []byte {
	if p.Party.Address != "" {
		return append([]byte("a"), p.Party.Address...)
	}
	k := append([]byte("r"), byte(len(p.Party.RoleCurrency)))
	k = append(k, p.Party.RoleCurrency...)
	return append(k, p.Party.Role...)
}

func partyArgs(p *contractstore.ContractParty) []any {
	var addr *string
	var cur, role []byte
	if p.Party.Address != "" {
		a := p.Party.Address
		addr = &a
	} else {
		cur, role = NonNil(p.Party.RoleCurrency), NonNil(p.Party.Role)
	}
	return []any{RefBytes(p.ContractID), PartyKey(p), addr, cur, role, p.Seq}
}

func transactionArgs(t *contractstore.Transaction) []any {
	args := []any{RefBytes(t.ContractID), append([]byte(nil), t.TxID[:]...), t.Seq}
	args = append(args, blockArgs(t.Block)...)
	var output []byte
	if t.Output != nil {
		output = RefBytes(*t.Output)
	}
	return append(args, string(t.Kind), RefBytes(t.Input), output, t.Closed, plainText(t.Reason), jsonText(t.Payload))
}

func payoutArgs(p *contractstore.Payout) []any {
	args := []any{RefBytes(p.ID), RefBytes(p.ContractID), append([]byte(nil), p.TxID[:]...), p.Seq}
	args = append(args, blockArgs(p.Block)...)
	assets := p.Assets
	if assets.Tokens == nil {
		assets = emptyAssets
	}
	var role []byte
	if p.Role != nil {
		role = RoleBytes(*p.Role)
	}
	args = append(args, NonNil(p.RolesCurrency), role, p.Address, mustJSON(assets), string(p.Status))
	if w := p.Withdrawal; w != nil {
		args = append(args, append([]byte(nil), w.TxID[:]...), w.Seq)
		args = append(args, blockArgs(w.Block)...)
	} else {
		args = append(args, nil, nil, nil, nil, nil)
	}
	var validator *string
	if p.ValidatorAddress != "" {
		validator = &p.ValidatorAddress
	}
	return append(args, validator)
}

// refArgs encodes a list of references.
func refArgs(refs []chain.TxOutRef) []any {
	out := make([]any, len(refs))
	for i, r := range refs {
		out[i] = RefBytes(r)
	}
	return out
}

// RoleBytes returns the bytes of a role name given as text (the Marlowe
// name escape).
func RoleBytes(text string) []byte {
	b, err := marlowe.NameFromText(text)
	if err != nil {
		return NonNil([]byte(text))
	}
	return NonNil(b)
}

// plainText makes a message storable in a text column: valid UTF-8 without
// U+0000 (the record's payload keeps the exact text).
func plainText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
