package devnet

import (
	"fmt"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// create starts the next lifecycle: a transaction paying the contract's
// first datum to a semantics validator, minting its role tokens, sometimes
// with Marlowe tags in metadata.
func (bb *blockBuild) create() error {
	g, st := bb.g, bb.st
	lc := g.lifecycleFor(st.created, bb.slot)
	st.created++
	version := &marlowe.ScriptVersions[bb.rng().IntN(len(marlowe.ScriptVersions))]
	gc := &genContract{
		lc:        lc,
		version:   version,
		address:   bb.scriptAddress(version.Semantics, true),
		merkleize: bb.rng().IntN(3) == 0 && singleInputs(lc),
		state:     lc.State,
	}
	roles := roleNames(lc.Contract, lc.State)
	if len(roles) > 0 {
		gc.rolesCurrency = bb.randomBytes(28)
	}
	gc.datum, gc.conts = lc.Contract, nil
	if gc.merkleize {
		gc.datum, gc.conts = merkleizeDeep(lc.Contract)
	}
	md := marlowe.MarloweData{Params: marlowe.MarloweParams{RolesCurrency: gc.rolesCurrency}, State: gc.state, Contract: gc.datum}
	datum := pd.Encode(md.ToData())

	tx := block.Tx{Inputs: []chain.TxOutRef{bb.walletInput()}, Fee: 200_000 + uint64(bb.rng().IntN(100_000))}
	wallet := block.TxOut{Address: bb.walletAddress(), Value: block.Value{Lovelace: 5_000_000}}
	if gc.rolesCurrency != nil {
		policy := chain.Hash28(gc.rolesCurrency)
		for _, r := range roles {
			tx.Mint = append(tx.Mint, block.MintAsset{Policy: policy, Name: r, Quantity: 1})
			wallet.Value.Assets = append(wallet.Value.Assets, block.Asset{Policy: policy, Name: r, Quantity: 1})
		}
	}
	contractOut := block.TxOut{Address: gc.address, Value: adaValue(&gc.state)}
	bb.datumOutput(&contractOut, &tx, datum, bb.rng().IntN(4) != 0)
	ix := bb.rng().IntN(2)
	if ix == 0 {
		tx.Outputs = []block.TxOut{contractOut, wallet}
	} else {
		tx.Outputs = []block.TxOut{wallet, contractOut}
	}
	act := Activity{Kind: ActivityCreate, Version: version.Name}
	if bb.rng().IntN(2) == 0 {
		tags := map[string]string{"devnet": "", lc.Name: ""}
		tx.Metadata = []block.Metadatum{{Label: 1564, Value: marloweTagsCBOR(tags)}}
		act.Tags = tags
	}
	tx.IsValid = true
	id := bb.add(tx)
	ref := chain.TxOutRef{TxID: id, Index: uint32(ix)}
	gc.id, gc.utxo = ref, ref
	act.TxID, act.Contract = id, &ref
	bb.acts = append(bb.acts, act)
	if len(lc.Steps) > 0 {
		st.contracts = append(st.contracts, gc)
	}
	return nil
}

// step applies the next transaction of a contract's lifecycle. With valid
// false the transaction fails phase-2 validation: it only consumes its
// collateral and the contract does not move.
func (bb *blockBuild) step(i int, valid bool) error {
	st := bb.st
	gc := st.contracts[i]
	s := &gc.lc.Steps[gc.step]
	inputs, witness := stepInputs(gc, s)
	redeemer := pd.Encode(marlowe.Redeemer(inputs).ToData())

	tx := block.Tx{
		Inputs:     []chain.TxOutRef{gc.utxo, bb.walletInput()},
		Collateral: []chain.TxOutRef{bb.walletInput()},
		Fee:        400_000 + uint64(bb.rng().IntN(300_000)),
		IsValid:    valid,
	}
	if !valid {
		tx.CollateralReturn = &block.TxOut{Address: bb.walletAddress(), Value: block.Value{Lovelace: 3_000_000}}
	}
	start, ttl := bb.g.intervalSlots(s.Input.Interval)
	tx.ValidityStart, tx.TTL = &start, &ttl
	for _, w := range witness {
		if tx.Datums == nil {
			tx.Datums = map[chain.Hash32][]byte{}
		}
		tx.Datums[chain.Hash32(marlowe.DatumHash(w))] = w
	}
	sorted := slices.Clone(tx.Inputs)
	slices.SortFunc(sorted, chain.TxOutRef.Compare)
	pos, _ := slices.BinarySearchFunc(sorted, gc.utxo, chain.TxOutRef.Compare)
	tx.Redeemers = []block.Redeemer{{Tag: block.RedeemerSpend, Index: uint32(pos), Data: redeemer, Mem: 8_000_000, Steps: 3_000_000_000}}

	next := &genContract{}
	*next = *gc
	next.step++
	next.state = s.State
	_, closed := s.Contract.(*marlowe.Close)
	contIx := -1
	if !closed {
		next.datum, next.conts = s.Contract, nil
		if next.merkleize {
			next.datum, next.conts = merkleizeDeep(s.Contract)
		}
		md := marlowe.MarloweData{Params: marlowe.MarloweParams{RolesCurrency: gc.rolesCurrency}, State: next.state, Contract: next.datum}
		out := block.TxOut{Address: gc.address, Value: adaValue(&next.state)}
		bb.datumOutput(&out, &tx, pd.Encode(md.ToData()), bb.rng().IntN(4) != 0)
		contIx = len(tx.Outputs)
		tx.Outputs = append(tx.Outputs, out)
	}
	payoutIxs, payoutValues, addressIxs, err := bb.payParties(&tx, gc, s.Payments)
	if err != nil {
		return err
	}
	id := bb.add(tx)
	return bb.stepped(i, next, stepOutputs{id: id, valid: valid, closed: closed, inputs: inputs, contIx: contIx,
		payoutIxs: payoutIxs, payoutValues: payoutValues, addressIxs: addressIxs})
}

// stepInputs returns a step's inputs as the redeemer carries them and the
// continuations to witness: an input that takes a merkleized case carries
// its continuation's hash, the contract it stands for in the witnesses.
func stepInputs(gc *genContract, s *LifecycleStep) (inputs []marlowe.Input, witness [][]byte) {
	inputs = slices.Clone(s.Input.Inputs)
	w, ok := gc.datum.(*marlowe.When)
	if !ok || len(inputs) == 0 || len(gc.conts) == 0 || s.Input.Interval.From.Cmp(w.Timeout) >= 0 {
		return inputs, nil
	}
	var match []int
	for ci := range w.Cases {
		if shapeMatch(w.Cases[ci].Action, inputs[0].Content) {
			match = append(match, ci)
		}
	}
	if len(match) == 1 && w.Cases[match[0]].Merkleized() {
		h := w.Cases[match[0]].MerkleizedThen
		inputs[0] = marlowe.Input{Content: inputs[0].Content, ContinuationHash: h}
		witness = append(witness, pd.Encode(marlowe.ContractToData(gc.conts[[32]byte(h)])))
	}
	return inputs, witness
}

// stepOutputs is what a step's transaction holds: where its continuation
// and payouts are.
type stepOutputs struct {
	id            chain.Hash32
	valid, closed bool
	inputs        []marlowe.Input
	contIx        int // the continuation's output, -1 when the contract closed
	payoutIxs     []int
	payoutValues  []block.Value
	addressIxs    []int
}

// stepped records the activity of the step of the i-th contract, which
// goes on as next (or ends).
func (bb *blockBuild) stepped(i int, next *genContract, o stepOutputs) error {
	st, gc := bb.st, bb.st.contracts[i]
	id, inputs, closed, contIx := o.id, o.inputs, o.closed, o.contIx
	payoutIxs, payoutValues, addressIxs := o.payoutIxs, o.payoutValues, o.addressIxs
	id0 := gc.id
	act := Activity{TxID: id, Contract: &id0}
	if !o.valid {
		act.Kind = ActivityInvalid
		bb.acts = append(bb.acts, act)
		return nil
	}
	// The follower reads the inputs from the redeemer, where a merkleized
	// input carries only its continuation's hash.
	js, err := marlowe.Redeemer(inputs).MarshalJSON()
	if err != nil {
		return err
	}
	act.Kind, act.Version, act.Inputs = ActivityApply, gc.version.Name, js
	if closed {
		act.Closed = true
	} else {
		ref := chain.TxOutRef{TxID: id, Index: uint32(contIx)}
		act.Output = &ref
		next.utxo = ref
	}
	for k, ix := range payoutIxs {
		ref := chain.TxOutRef{TxID: id, Index: uint32(ix)}
		act.Payouts = append(act.Payouts, ref)
		st.payouts = append(st.payouts, genPayout{ref: ref, contract: gc.id, value: payoutValues[k], due: bb.blockNo + 1 + uint64(bb.rng().IntN(20))})
	}
	for _, ix := range addressIxs {
		act.AddressPayouts = append(act.AddressPayouts, chain.TxOutRef{TxID: id, Index: uint32(ix)})
	}
	bb.acts = append(bb.acts, act)
	if closed || next.step >= len(next.lc.Steps) {
		st.contracts = slices.Delete(st.contracts, i, i+1)
	} else {
		st.contracts[i] = next
	}
	return nil
}

// payParties adds the outputs paying a step's payments to parties, the way
// the Runtime's builder and wallets write them: the Marlowe validator checks
// totals per payee, so every role is paid its total in one output to the
// payout validator (the validator wants one output holding it), and an
// address's payments go in one output or, sometimes, in several. Sometimes an
// address payee submits the step: the wallet's change then goes to its
// address, in one of its payment outputs or beside them. Sometimes the
// payment outputs are in another order than the payments. It returns the
// role payout outputs with their values and the address payment outputs,
// in output order; the change output comes last unless it was shuffled in.
func (bb *blockBuild) payParties(tx *block.Tx, gc *genContract, payments []Payment) (roleIxs []int, roleValues []block.Value, addressIxs []int, err error) {
	payees, err := bb.payeesOf(gc, payments)
	if err != nil {
		return nil, nil, nil, err
	}
	type paid struct {
		out  block.TxOut
		kind int // 0 the change, 1 a role payout, 2 an address payment
	}
	var outs []paid
	change := block.TxOut{Address: bb.walletAddress(), Value: block.Value{Lovelace: 1_500_000}}
	merged := false // the change is in a payment output
	var submitter *payee
	var addressPayees []*payee
	for _, pe := range payees {
		if pe.addr != nil {
			addressPayees = append(addressPayees, pe)
		}
	}
	if len(addressPayees) > 0 && bb.rng().IntN(2) == 0 {
		submitter = addressPayees[bb.rng().IntN(len(addressPayees))]
	}
	for _, pe := range payees {
		for _, part := range pe.parts {
			value := partValue(part)
			if pe.role != nil {
				datum := pd.Encode((&marlowe.PayoutDatum{RolesCurrency: gc.rolesCurrency, Role: pe.role}).ToData())
				out := block.TxOut{Address: bb.scriptAddress(gc.version.Payout, false), Value: value}
				bb.datumOutput(&out, tx, datum, bb.rng().IntN(2) == 0)
				outs = append(outs, paid{out: out, kind: 1})
				continue
			}
			outs = append(outs, paid{out: block.TxOut{Address: pe.addr, Value: value}, kind: 2})
		}
		if pe != submitter {
			continue
		}
		// The payee's wallet pays the fee and takes the change: more than
		// all it is paid in ada, so that it cannot pass for its payments.
		change.Address = pe.addr
		change.Value.Lovelace = 1_000_000 + uint64(bb.rng().IntN(4_000_000))
		for _, part := range pe.parts {
			change.Value.Lovelace += partValue(part).Lovelace
		}
		if bb.rng().IntN(2) == 0 {
			j := len(outs) - 1 - bb.rng().IntN(len(pe.parts))
			outs[j].out.Value = addValue(outs[j].out.Value, change.Value)
			merged = true
		}
	}
	last := !merged // the change goes last
	if len(outs) > 0 && bb.rng().IntN(3) == 0 {
		if !merged {
			outs = append(outs, paid{out: change, kind: 0})
			last = false
		}
		bb.rng().Shuffle(len(outs), func(i, j int) { outs[i], outs[j] = outs[j], outs[i] })
	}
	for _, o := range outs {
		ix := len(tx.Outputs)
		tx.Outputs = append(tx.Outputs, o.out)
		switch o.kind {
		case 1:
			roleIxs, roleValues = append(roleIxs, ix), append(roleValues, o.out.Value)
		case 2:
			addressIxs = append(addressIxs, ix)
		}
	}
	if last {
		tx.Outputs = append(tx.Outputs, change)
	}
	return roleIxs, roleValues, addressIxs, nil
}

// payee is a party a step pays: a role or an address, and the payments of
// each output to it.
type payee struct {
	role  []byte // or
	addr  []byte
	parts [][]Payment
}

// payeesOf groups a step's payments to parties by payee, in the order of
// each payee's first payment, and shares them out among its outputs.
func (bb *blockBuild) payeesOf(gc *genContract, payments []Payment) ([]*payee, error) {
	var payees []*payee
	byKey := map[string]*payee{}
	for _, p := range payments {
		if p.To.Kind != marlowe.PayeeParty {
			continue
		}
		pe := &payee{}
		key := "r" + string(p.To.Party.Role)
		if p.To.Party.Address != nil {
			addr, err := p.To.Party.Address.Bytes()
			if err != nil {
				return nil, fmt.Errorf("devnet: lifecycle %s: address payout: %w", gc.lc.Name, err)
			}
			pe.addr, key = addr, "a"+string(addr)
		} else {
			pe.role = p.To.Party.Role
		}
		if byKey[key] == nil {
			byKey[key] = pe
			payees = append(payees, pe)
		}
		pe = byKey[key]
		// A role's payments, and most often an address's, share one output;
		// else a payment starts an output or joins a random one.
		switch k := len(pe.parts); {
		case k == 0:
			pe.parts = [][]Payment{{p}}
		case pe.role != nil || bb.rng().IntN(2) == 0:
			pe.parts[0] = append(pe.parts[0], p)
		default:
			if j := bb.rng().IntN(k + 1); j < k {
				pe.parts[j] = append(pe.parts[j], p)
			} else {
				pe.parts = append(pe.parts, []Payment{p})
			}
		}
	}
	return payees, nil
}

// partValue is the value of an output paying payments to one payee: their
// ada and tokens (see paymentValue), with the minimum ada beside tokens
// once.
func partValue(part []Payment) block.Value {
	var v block.Value
	minAda := uint64(0)
	for _, p := range part {
		pv := paymentValue(p.Token, p.Amount)
		if len(p.Token.Currency) > 0 {
			minAda = max(minAda, pv.Lovelace)
			pv.Lovelace = 0
		}
		v = addValue(v, pv)
	}
	v.Lovelace = max(v.Lovelace, minAda)
	return v
}

// withdraw spends the due payouts of one contract.
func (bb *blockBuild) withdraw() error {
	st := bb.st
	var first *genPayout
	for i := range st.payouts {
		if st.payouts[i].due <= bb.blockNo {
			first = &st.payouts[i]
			break
		}
	}
	if first == nil {
		return nil
	}
	contract := first.contract
	var spent []chain.TxOutRef
	total := block.Value{Lovelace: 1_000_000}
	kept := st.payouts[:0:0]
	for _, p := range st.payouts {
		if p.contract == contract && p.due <= bb.blockNo && len(spent) < 3 {
			spent = append(spent, p.ref)
			total = addValue(total, p.value)
			continue
		}
		kept = append(kept, p)
	}
	st.payouts = kept
	tx := block.Tx{Inputs: append(slices.Clone(spent), bb.walletInput()), Collateral: []chain.TxOutRef{bb.walletInput()}, Fee: 300_000, IsValid: true}
	sorted := slices.Clone(tx.Inputs)
	slices.SortFunc(sorted, chain.TxOutRef.Compare)
	unit := pd.Encode(pd.NewConstr(0))
	for _, ref := range spent {
		pos, _ := slices.BinarySearchFunc(sorted, ref, chain.TxOutRef.Compare)
		tx.Redeemers = append(tx.Redeemers, block.Redeemer{Tag: block.RedeemerSpend, Index: uint32(pos), Data: unit, Mem: 1_000_000, Steps: 400_000_000})
	}
	tx.Outputs = []block.TxOut{{Address: bb.walletAddress(), Value: total}}
	id := bb.add(tx)
	slices.SortFunc(spent, chain.TxOutRef.Compare)
	bb.acts = append(bb.acts, Activity{TxID: id, Kind: ActivityWithdraw, Spent: spent})
	return nil
}

// malformed pays to a semantics validator with a datum that is not
// MarloweData, or with a datum hash whose datum is missing.
func (bb *blockBuild) malformed() error {
	version := &marlowe.ScriptVersions[bb.rng().IntN(len(marlowe.ScriptVersions))]
	tx := block.Tx{Inputs: []chain.TxOutRef{bb.walletInput()}, Fee: 180_000, IsValid: true}
	out := block.TxOut{Address: bb.scriptAddress(version.Semantics, true), Value: block.Value{Lovelace: 3_000_000}}
	if bb.rng().IntN(2) == 0 {
		out.InlineDatum = pd.Encode(pd.NewConstr(0, pd.NewInt(int64(bb.rng().IntN(1000)))))
	} else {
		h := bb.randomHash32()
		out.DatumHash = &h
	}
	tx.Outputs = []block.TxOut{out, {Address: bb.walletAddress(), Value: block.Value{Lovelace: 1_000_000}}}
	id := bb.add(tx)
	bb.acts = append(bb.acts, Activity{TxID: id, Kind: ActivityRejected, Rejected: []chain.TxOutRef{{TxID: id, Index: 0}}})
	return nil
}

// fill adds ordinary transactions until the block body reaches target bytes.
func (bb *blockBuild) fill(target int) error {
	for bb.size < target {
		tx := block.Tx{Fee: 170_000 + uint64(bb.rng().IntN(100_000)), IsValid: true}
		for range 1 + bb.rng().IntN(3) {
			tx.Inputs = append(tx.Inputs, bb.walletInput())
		}
		for range 1 + bb.rng().IntN(3) {
			tx.Outputs = append(tx.Outputs, block.TxOut{Address: bb.walletAddress(), Value: block.Value{Lovelace: 1_000_000 + uint64(bb.rng().IntN(1_000_000_000))}})
		}
		// Pad with a metadata message so transactions reach realistic sizes.
		if room := target - bb.size; room > 400 {
			n := min(bb.rng().IntN(4000), room-300)
			if n > 0 {
				tx.Metadata = []block.Metadatum{{Label: 674, Value: fillerMetadata(bb.randomBytes(n))}}
			}
		}
		bb.add(tx)
	}
	return nil
}

// fillerMetadata is a metadatum {"msg": [bytes chunks of 64]}.
func fillerMetadata(b []byte) []byte {
	return appendChunks([]byte{0xa1, 0x63, 'm', 's', 'g'}, 2, b)
}

// marloweTagsCBOR writes Marlowe tags metadata, version 2:
// [2, [[tag] | [tag, payload] ...]] with tags of at most 64 characters.
func marloweTagsCBOR(tags map[string]string) []byte {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []byte{0x82, 0x02}
	out = pd.AppendHead(out, 4, uint64(len(keys)))
	for _, k := range keys {
		out = append(out, 0x81)
		out = appendCBORText(out, k)
	}
	return out
}

func appendCBORText(dst []byte, s string) []byte {
	if len(s) <= 64 {
		dst = pd.AppendHead(dst, 3, uint64(len(s)))
		return append(dst, s...)
	}
	return appendChunks(dst, 3, []byte(s))
}

// appendChunks writes b as an array of strings of major type major (2:
// bytes, 3: text) of 64 bytes at most, as metadata holds longer ones.
func appendChunks(dst []byte, major byte, b []byte) []byte {
	dst = pd.AppendHead(dst, 4, uint64((len(b)+63)/64))
	for len(b) > 0 {
		n := min(len(b), 64)
		dst = pd.AppendHead(dst, major, uint64(n))
		dst = append(dst, b[:n]...)
		b = b[n:]
	}
	return dst
}

// addValue sums two values, merging quantities of the same asset.
func addValue(a, b block.Value) block.Value {
	out := block.Value{Lovelace: a.Lovelace + b.Lovelace, Assets: slices.Clone(a.Assets)}
	for _, x := range b.Assets {
		merged := false
		for i := range out.Assets {
			if out.Assets[i].Policy == x.Policy && string(out.Assets[i].Name) == string(x.Name) {
				out.Assets[i].Quantity += x.Quantity
				merged = true
				break
			}
		}
		if !merged {
			out.Assets = append(out.Assets, x)
		}
	}
	return out
}
