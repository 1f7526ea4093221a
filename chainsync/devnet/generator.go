package devnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Op is one change of the generated chain: a new block, or a rollback.
type Op struct {
	Block    *StoredBlock // set for a new block
	Rollback *chain.Point // set for a rollback to this point
}

// genContract is a contract in progress. It is never changed once a
// snapshot holds it: a step makes a new one.
type genContract struct {
	lc            *Lifecycle
	step          int
	id            chain.TxOutRef
	utxo          chain.TxOutRef
	version       *marlowe.ScriptVersion
	address       []byte
	rolesCurrency []byte
	merkleize     bool
	datum         marlowe.Contract // the contract in the datum (merkleized throughout when merkleize)
	conts         map[[32]byte]marlowe.Contract
	state         marlowe.State
}

// genPayout is a role payout not yet withdrawn.
type genPayout struct {
	ref      chain.TxOutRef
	contract chain.TxOutRef
	value    block.Value
	due      uint64 // block number from which it is withdrawn
}

// genState is everything the next block depends on, kept per block so a
// rollback returns to it.
type genState struct {
	tip       chain.BlockHeader
	contracts []*genContract
	payouts   []genPayout
	created   int
}

func (s *genState) clone() *genState {
	c := *s
	c.contracts = slices.Clone(s.contracts)
	c.payouts = slices.Clone(s.payouts)
	return &c
}

// Generator makes a deterministic Conway-era chain with Marlowe contract
// lifecycles (from the reference traces) on all five script versions,
// filler transactions, and rollbacks.
type Generator struct {
	cfg        GeneratorConfig
	rng        *rand.Rand
	lifecycles []Lifecycle
	st         *genState
	// snaps[i] is the state after the block numbered snapBase+i.
	snaps    []*genState
	snapBase uint64
	// activity[i] is the activity of the block numbered cfg.After.BlockNo+i+1
	// on the current chain.
	activity [][]Activity
	blocks   uint64 // blocks made, forks included
	// window is the width in slots of a scheduled step's window (0 on the
	// devnet's clock, where lifecycles are not scheduled).
	window uint64
	// abandoned counts the contracts left open because the chain passed a
	// step's window before a block took it (forks included).
	abandoned int
}

// NewGenerator returns a generator at the origin.
func NewGenerator(cfg GeneratorConfig) (*Generator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	lcs, err := Lifecycles(cfg.network())
	if err != nil {
		return nil, err
	}
	g := &Generator{
		cfg:        cfg,
		rng:        rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6d61726c6f7765)),
		lifecycles: lcs,
		st:         &genState{tip: cfg.After},
		snapBase:   cfg.After.BlockNo,
	}
	g.snaps = []*genState{g.st}
	if !cfg.Clock.IsZero() {
		g.window = stepWindowSlots(&g.cfg)
	}
	return g, nil
}

// stepWindowSlots is the width of a scheduled step's window: room for
// about two steps of every contract in progress at the rate Marlowe
// transactions come (roughly one step per block with Marlowe activity),
// at most 12 hours.
func stepWindowSlots(c *GeneratorConfig) uint64 {
	blocks := math.Ceil(2 * float64(c.MaxActive) / max(c.MarloweShare, 0.01))
	slots := uint64(blocks) * uint64(c.MeanSlotGap)
	limit := uint64(12 * time.Hour.Milliseconds() / c.Clock.SlotLengthMillis)
	return max(min(slots, limit), 1)
}

// scheduled reports whether lifecycles are scheduled on the chain's clock.
func (g *Generator) scheduled() bool { return g.window > 0 }

// clock is the chain's slot clock.
func (g *Generator) clock() chain.SlotConfig {
	if g.cfg.Clock.IsZero() {
		return DevnetClock
	}
	return g.cfg.Clock
}

// intervalSlots turns a step's semantic interval into its validity
// interval in slots on the chain's clock.
func (g *Generator) intervalSlots(iv marlowe.TimeInterval) (start, ttl uint64) {
	return intervalSlots(g.clock(), iv)
}

// lifecycleFor is the lifecycle of the n-th contract, created in the block
// at slot: the built-in one, or on a network's clock a copy scheduled from
// that slot on.
func (g *Generator) lifecycleFor(n int, slot uint64) *Lifecycle {
	lc := &g.lifecycles[n%len(g.lifecycles)]
	if !g.scheduled() {
		return lc
	}
	return scheduleLifecycle(lc, g.cfg.Clock, slot, g.window)
}

// Abandoned returns the number of contracts left open because the chain
// passed the window of their next step (always 0 on the devnet's clock).
func (g *Generator) Abandoned() int { return g.abandoned }

// Tip returns the header of the newest block (zero at the origin).
func (g *Generator) Tip() chain.BlockHeader { return g.st.tip }

// Activity returns the Marlowe activity on the current chain, oldest first.
func (g *Generator) Activity() []Activity {
	var out []Activity
	for _, a := range g.activity {
		out = append(out, a...)
	}
	return out
}

// Next returns the next change of the chain; a new block comes a drawn
// number of slots after the tip. Not for a chain on the wall clock
// (NextAt).
func (g *Generator) Next() (Op, error) {
	if g.cfg.WallClock {
		return Op{}, errors.New("devnet: a chain on the wall clock takes its blocks' slots: NextAt")
	}
	return g.next(0)
}

// NextAt returns the next change of a chain on the wall clock
// (GeneratorConfig.WallClock): a new block is at slot (the one after the
// tip's if that is not later). The same seed and the same slots give the
// same chain, which is how a stored chain is made again.
func (g *Generator) NextAt(slot uint64) (Op, error) {
	if !g.cfg.WallClock {
		return Op{}, errors.New("devnet: NextAt is for a chain on the wall clock")
	}
	return g.next(slot)
}

func (g *Generator) next(slot uint64) (Op, error) {
	if g.cfg.RollbackEvery > 0 && g.st.tip.BlockNo > 1 && g.rng.IntN(g.cfg.RollbackEvery) == 0 {
		depth := 1 + g.rng.IntN(g.cfg.MaxRollbackDepth)
		return g.rollback(depth), nil
	}
	b, err := g.nextBlock(slot)
	if err != nil {
		return Op{}, err
	}
	return Op{Block: b}, nil
}

func (g *Generator) rollback(depth int) Op {
	tipNo := g.st.tip.BlockNo
	avail := tipNo - g.snapBase // snapshots we can return to
	d := min(uint64(depth), avail)
	target := tipNo - d
	g.st = g.snaps[target-g.snapBase]
	g.snaps = g.snaps[:target-g.snapBase+1]
	g.activity = g.activity[:target-g.cfg.After.BlockNo]
	p := g.st.tip.Point()
	if g.st.tip.Hash.IsZero() {
		p = chain.Origin
	}
	return Op{Rollback: &p}
}

// nextBlock makes the next block: at slot on the wall clock, else a drawn
// gap after the tip.
func (g *Generator) nextBlock(at uint64) (*StoredBlock, error) {
	st := g.st.clone()
	prev := st.tip
	slot := max(at, prev.Slot+1)
	if !g.cfg.WallClock {
		slot = prev.Slot + 1 + uint64(g.rng.IntN(2*g.cfg.MeanSlotGap))
	}
	blockNo := prev.BlockNo + 1
	bb := &blockBuild{g: g, st: st, blockNo: blockNo, slot: slot}
	if g.scheduled() {
		bb.dropMissed()
	}
	if g.rng.Float64() < g.cfg.MarloweShare {
		n := 1 + g.rng.IntN(3)
		for range n {
			if err := bb.marloweTx(); err != nil {
				return nil, err
			}
		}
	}
	target := g.blockSize()
	if err := bb.fill(target); err != nil {
		return nil, err
	}
	raw, hdr, err := buildConwayBlock(slot, blockNo, prev.Hash, bb.txs)
	if err != nil {
		return nil, fmt.Errorf("devnet: block %d: %w", blockNo, err)
	}
	for i := range bb.acts {
		bb.acts[i].Slot, bb.acts[i].BlockNo = hdr.Slot, hdr.BlockNo
	}
	st.tip = hdr
	g.st = st
	g.snaps = append(g.snaps, st)
	if keep := g.cfg.MaxRollbackDepth + 1; len(g.snaps) > keep {
		drop := len(g.snaps) - keep
		g.snaps = slices.Delete(g.snaps, 0, drop)
		g.snapBase += uint64(drop)
	}
	g.activity = append(g.activity, bb.acts)
	g.blocks++
	return &StoredBlock{Type: block.TypeConway, Header: hdr, Raw: raw}, nil
}

// blockSize draws a body size: exponential around the mean, within limits.
func (g *Generator) blockSize() int {
	if g.cfg.MeanBlockSize == 0 {
		return 0
	}
	u := g.rng.Float64()
	size := -float64(g.cfg.MeanBlockSize) * math.Log(1-u)
	return int(min(max(size, 300), MaxBlockBodySize-4096))
}

// blockBuild collects the transactions of one block.
type blockBuild struct {
	g       *Generator
	st      *genState
	blockNo uint64
	slot    uint64
	txs     []block.Tx
	acts    []Activity
	size    int
}

func (bb *blockBuild) rng() *rand.Rand { return bb.g.rng }

func (bb *blockBuild) add(tx block.Tx) chain.Hash32 {
	tx.Index = len(bb.txs)
	id, size := txIDAndSize(&tx)
	tx.ID = id
	bb.txs = append(bb.txs, tx)
	bb.size += size
	return id
}

func (bb *blockBuild) randomHash32() chain.Hash32 {
	var h chain.Hash32
	for i := range h {
		h[i] = byte(bb.rng().Uint32())
	}
	return h
}

func (bb *blockBuild) randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(bb.rng().Uint32())
	}
	return b
}

// walletInput is an input from a wallet: a fresh reference.
func (bb *blockBuild) walletInput() chain.TxOutRef {
	return chain.TxOutRef{TxID: bb.randomHash32(), Index: uint32(bb.rng().IntN(4))}
}

// walletAddress is an enterprise key address of the chain's network.
func (bb *blockBuild) walletAddress() []byte {
	return append([]byte{0x60 | bb.networkID()}, bb.randomBytes(28)...)
}

// networkID is the network id of the chain's addresses' headers.
func (bb *blockBuild) networkID() byte { return byte(bb.g.cfg.network()) }

// marloweTx adds one piece of Marlowe activity.
func (bb *blockBuild) marloweTx() error {
	if bb.g.scheduled() {
		return bb.scheduledTx()
	}
	st := bb.st
	r := bb.rng().IntN(100)
	switch {
	case r < 3:
		return bb.malformed()
	case r < 8 && len(st.contracts) > 0:
		return bb.step(bb.rng().IntN(len(st.contracts)), false)
	case r < 30 && bb.duePayouts() > 0:
		return bb.withdraw()
	case r < 70 && len(st.contracts) > 0:
		return bb.step(bb.rng().IntN(len(st.contracts)), true)
	case len(st.contracts) < bb.g.cfg.MaxActive:
		return bb.create()
	case len(st.contracts) > 0:
		return bb.step(bb.rng().IntN(len(st.contracts)), true)
	}
	return nil
}

// scheduledTx is marloweTx on a network's clock: the same choices, but a
// step is only taken by a contract whose step is due at the block's slot
// (the one whose window closes first).
func (bb *blockBuild) scheduledTx() error {
	st := bb.st
	r := bb.rng().IntN(100)
	due := bb.dueContract()
	switch {
	case r < 3:
		return bb.malformed()
	case r < 8 && due >= 0:
		return bb.step(due, false)
	case r < 30 && bb.duePayouts() > 0:
		return bb.withdraw()
	case r < 70 && due >= 0:
		return bb.step(due, true)
	case len(st.contracts) < bb.g.cfg.MaxActive:
		return bb.create()
	case due >= 0:
		return bb.step(due, true)
	}
	return nil
}

// dueContract returns the index of the contract in progress whose next
// step's window holds the block's slot and closes first, or -1.
func (bb *blockBuild) dueContract() int {
	best, deadline := -1, uint64(math.MaxUint64)
	for i, gc := range bb.st.contracts {
		w := gc.lc.windows[gc.step]
		if w.notBefore <= bb.slot && bb.slot <= w.deadline && w.deadline < deadline {
			best, deadline = i, w.deadline
		}
	}
	return best
}

// dropMissed abandons the contracts whose next step's window closed before
// the block's slot: they stay open on chain and are not stepped again.
func (bb *blockBuild) dropMissed() {
	bb.st.contracts = slices.DeleteFunc(bb.st.contracts, func(gc *genContract) bool {
		missed := gc.lc.windows[gc.step].deadline < bb.slot
		if missed {
			bb.g.abandoned++
		}
		return missed
	})
}

func (bb *blockBuild) duePayouts() int {
	n := 0
	for _, p := range bb.st.payouts {
		if p.due <= bb.blockNo {
			n++
		}
	}
	return n
}

// scriptAddress makes an address of the chain's network paying to a
// script, with a random stake part (none, key, script or pointer).
func (bb *blockBuild) scriptAddress(script chain.Hash28, withStake bool) []byte {
	id := bb.networkID()
	if !withStake {
		return append([]byte{0x70 | id}, script[:]...)
	}
	switch bb.rng().IntN(4) {
	case 0:
		return append([]byte{0x70 | id}, script[:]...)
	case 1:
		a := append([]byte{0x10 | id}, script[:]...)
		return append(a, bb.randomBytes(28)...)
	case 2:
		a := append([]byte{0x30 | id}, script[:]...)
		return append(a, bb.randomBytes(28)...)
	}
	a := append([]byte{0x50 | id}, script[:]...)
	pa := marlowe.PartyAddress{Network: bb.g.cfg.network(), Address: marlowe.Address{
		Payment: marlowe.Credential{Kind: marlowe.ScriptCredential, Hash: script[:]},
		Staking: &marlowe.StakingCredential{Pointer: &marlowe.StakePointer{
			Slot: big.NewInt(int64(bb.rng().IntN(1 << 24))), TxIndex: big.NewInt(int64(bb.rng().IntN(64))), CertIndex: big.NewInt(int64(bb.rng().IntN(4))),
		}},
	}}
	raw, err := pa.Bytes()
	if err != nil {
		return a
	}
	return raw
}

// datumOutput sets an output's datum inline or by hash (the datum then goes
// in the witness set).
func (bb *blockBuild) datumOutput(out *block.TxOut, tx *block.Tx, datum []byte, inline bool) {
	if inline {
		out.InlineDatum = datum
		return
	}
	h := chain.Hash32(marlowe.DatumHash(datum))
	out.DatumHash = &h
	if tx.Datums == nil {
		tx.Datums = map[chain.Hash32][]byte{}
	}
	tx.Datums[h] = datum
}

// adaValue is the lovelace held in ada accounts, at least 2 ada.
func adaValue(st *marlowe.State) block.Value {
	total := new(big.Int)
	for _, a := range st.Accounts {
		if len(a.Token.Currency) == 0 {
			total.Add(total, a.Amount)
		}
	}
	v := uint64(2_000_000)
	if total.IsUint64() && total.Uint64() > v {
		v = total.Uint64()
	}
	return block.Value{Lovelace: v}
}

// paymentValue is the value of a payment: ada, or a native token where the
// currency is a real 28-byte policy (with 2 ada beside it), else 2 ada.
func paymentValue(t marlowe.Token, amount *big.Int) block.Value {
	q := uint64(1)
	if amount.IsUint64() && amount.Sign() > 0 {
		q = amount.Uint64()
	}
	if len(t.Currency) == 0 {
		return block.Value{Lovelace: max(q, 1_000_000)}
	}
	if len(t.Currency) == 28 {
		return block.Value{Lovelace: 2_000_000, Assets: []block.Asset{{Policy: chain.Hash28(t.Currency), Name: t.Name, Quantity: q}}}
	}
	return block.Value{Lovelace: 2_000_000}
}

// roleNames collects the role names a contract and state mention.
func roleNames(c marlowe.Contract, st marlowe.State) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	add := func(p marlowe.Party) {
		if p.Address == nil && !seen[string(p.Role)] {
			seen[string(p.Role)] = true
			out = append(out, p.Role)
		}
	}
	for _, a := range st.Accounts {
		add(a.Party)
	}
	js, err := marlowe.ContractJSON(c)
	if err == nil {
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				if r, ok := x["role_token"].(string); ok {
					if name, err := marlowe.NameFromText(r); err == nil {
						add(marlowe.Party{Role: name})
					}
				}
				for _, e := range x {
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		var v any
		if json.Unmarshal(js, &v) == nil {
			walk(v)
		}
	}
	return out
}

// chainTip is the generator's tip as a node reports it.
func chainTip(g *Generator) chain.Tip {
	h := g.Tip()
	return chain.Tip{Point: h.Point(), BlockNo: h.BlockNo}
}
