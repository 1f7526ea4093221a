package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/network"
)

// DevnetChainFile is the name of the devnet's chain file in a data directory.
const DevnetChainFile = "devnet.chain"

// devnetNetwork is the network a devnet serves: its magic, the slot
// configuration followers must use, and the generator's clock (zero for
// the devnet's own, on which the lifecycles keep the traces' times).
type devnetNetwork struct {
	magic uint32
	slots chain.SlotConfig
	clock chain.SlotConfig
}

// resolveDevnetNetwork turns the network flags into a network.
func resolveDevnetNetwork(s network.Settings) (devnetNetwork, error) {
	if s.Genesis != "" && s.Magic == 0 {
		g, err := chain.ReadShelleyGenesis(s.Genesis)
		if err != nil {
			return devnetNetwork{}, err
		}
		s.Magic = g.NetworkMagic
	}
	if s.Magic == 0 {
		s.Magic = devnet.NetworkMagic
	}
	sc, err := network.Slots(s, "--network-magic", "--system-start", "--slot-length", "--shelley-genesis")
	if err != nil {
		return devnetNetwork{}, err
	}
	n := devnetNetwork{magic: s.Magic, slots: sc}
	if s.Magic != devnet.NetworkMagic || s.SystemStart != "" || s.Genesis != "" {
		n.clock = sc
	}
	return n, nil
}

// startMillis is the POSIX time (ms) a generated chain on n's clock begins
// at: text (RFC 3339, or now), else now on a public network (so that its
// dates are today's) and the system start on another.
func (n devnetNetwork) startMillis(text string, now time.Time) (int64, error) {
	switch text {
	case "":
		if _, err := chain.SlotConfigFor(n.magic); err == nil {
			return now.UnixMilli(), nil
		}
		return n.slots.SlotStart(0), nil
	case "now":
		return now.UnixMilli(), nil
	}
	t, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return 0, fmt.Errorf("--start-time %q: want an RFC 3339 time like 2025-01-01T00:00:00Z, or now", text)
	}
	if ms := t.UnixMilli(); ms >= n.slots.SlotStart(0) {
		return ms, nil
	}
	return 0, fmt.Errorf("--start-time %s is before the network's slot 0", text)
}

// followHint is how to follow the devnet with the service.
func followHint(socket string, n devnetNetwork, s network.Settings) string {
	hint := fmt.Sprintf("marlowe-follower run --node-socket %s --network-magic %d", socket, n.magic)
	switch {
	case s.Genesis != "":
		hint += " --shelley-genesis " + s.Genesis
	case s.SystemStart != "":
		hint += fmt.Sprintf(" --system-start %s --slot-length %s", s.SystemStart, s.SlotLength)
	}
	return hint
}

// devnetLong is the devnet command's help.
const devnetLong = "Run the built-in devnet node: a node-to-client chain-sync server on a Unix socket that behaves like\n" +
	"cardano-node towards local clients. It serves a deterministic Conway-era chain (from --seed) with Marlowe\n" +
	"contract lifecycles on all five script versions, filler transactions and rollbacks, or a file of real\n" +
	"blocks (--replay).\n\n" +
	"Its network magic is 42 unless --network-magic says otherwise. Clients must propose that magic, and\n" +
	"followers read validity intervals with that network's slot clock: built in for mainnet (764824073),\n" +
	"preprod (1) and preview (2), given by --system-start and --slot-length (or --shelley-genesis) for any\n" +
	"other. Replay real blocks with their network's magic. A generated chain on such a clock has its blocks\n" +
	"at that network's slots, every 20 s from --start-time (by default now on the public networks), and each\n" +
	"contract's timeouts and validity intervals on that clock, so that the semantics accept every step. On\n" +
	"magic 42 a generated chain plays the reference traces at their own times (1969, 1 ms slots) unless\n" +
	"--wall-clock: then, on any network, every block is made at the time it is served and every contract\n" +
	"is scheduled from its creation, its deadlines ahead (what run --devnet does).\n\n" +
	"With --chain-dir the generated chain is kept in DIR/" + DevnetChainFile + ": started again on it, the devnet\n" +
	"serves the same chain and continues it as one uninterrupted run would. --prefix-blocks serves only the\n" +
	"beginning of the stored chain (kept or replayed) and reveals the rest on SIGUSR1 or after --reveal-after."

// devnetFlags are the devnet command's settings, as its flags give them.
type devnetFlags struct {
	socket      string
	gen         devnet.GeneratorConfig
	blocks      uint64
	rate        float64
	replay      string
	activity    string
	pregen      bool
	journal     bool
	settings    network.Settings
	startTime   string
	chainDir    string
	magic       uint
	prefix      int
	revealAfter time.Duration
	wallClock   bool
}

func newDevnetCommand() *cobra.Command {
	d := &devnetFlags{}
	cmd := &cobra.Command{
		Use:   "devnet --socket PATH",
		Short: "Run the built-in devnet node: a chain-sync server on a Unix socket serving a generated Marlowe chain",
		Long:  devnetLong,
		Args:  exactArgs(0),
		RunE:  func(cmd *cobra.Command, _ []string) error { return d.run(cmd) },
	}
	d.register(cmd.Flags())
	config.RegisterFlags(cmd.Flags(), "log")
	return cmd
}

// register defines the devnet command's flags on f.
func (d *devnetFlags) register(f *pflag.FlagSet) {
	def := devnet.DefaultGeneratorConfig()
	d.gen = def
	f.StringVar(&d.socket, "socket", "", "Unix socket to serve on")
	f.Int64Var(&d.gen.Seed, "seed", def.Seed, "seed of the generated chain: the same seed gives the same chain")
	f.Uint64Var(&d.blocks, "blocks", 0, "stop after this many blocks and wait at the tip (0: never stop)")
	f.Float64Var(&d.rate, "block-rate", 20, "blocks per second (0: as fast as possible)")
	f.BoolVar(&d.pregen, "pregenerate", false, "generate all --blocks before serving (for benchmarks)")
	f.Float64Var(&d.gen.MarloweShare, "marlowe-share", def.MarloweShare, "fraction of blocks with Marlowe activity (0..1)")
	f.IntVar(&d.gen.MeanBlockSize, "block-size", def.MeanBlockSize, "mean block body size in bytes (sizes vary up to 90,112)")
	f.IntVar(&d.gen.RollbackEvery, "rollback-every", def.RollbackEvery, "mean blocks between rollbacks (0: none)")
	f.IntVar(&d.gen.MaxRollbackDepth, "rollback-depth", def.MaxRollbackDepth, "deepest rollback in blocks")
	f.IntVar(&d.gen.MeanSlotGap, "slot-gap", def.MeanSlotGap, "mean slots between blocks: 20 s of the devnet's 1 ms slots; on another network's clock 20 s of its slots unless given")
	f.BoolVar(&d.journal, "journal", false, "serve every client the chain's whole history, forks included, whatever its timing (reproducible runs)")
	f.StringVar(&d.replay, "replay", "", "serve the blocks of this file (hex, one block per line, optionally TYPE:HEX) instead of generating")
	f.StringVar(&d.activity, "activity", "", "write the generated Marlowe activity (the expected result) to this file as JSON lines")
	f.UintVar(&d.magic, "network-magic", devnet.NetworkMagic, "network magic clients must propose: 42 (the devnet), mainnet 764824073, preprod 1, preview 2, or any other with a slot clock; with --shelley-genesis its magic unless given")
	f.StringVar(&d.settings.SystemStart, "system-start", "", "for a network without a built-in slot clock: the time slot 0 began, RFC 3339 (2025-01-01T00:00:00Z); with --slot-length")
	f.DurationVar(&d.settings.SlotLength, "slot-length", 0, "for a network without a built-in slot clock: the length of a slot (1s, 100ms); with --system-start")
	f.StringVar(&d.settings.Genesis, "shelley-genesis", "", "for a network without a built-in slot clock: its Shelley genesis file (networkMagic, systemStart and slotLength)")
	f.StringVar(&d.startTime, "start-time", "", "on another network's clock: when the generated chain begins, RFC 3339 or now (a kept chain keeps its start; default: now on mainnet, preprod and preview, the system start on others)")
	f.BoolVar(&d.wallClock, "wall-clock", false, "make every block at the time it is made (at --block-rate) and schedule every contract from its creation, on the network's clock (on magic 42 the devnet's): a chain of today, its deadlines ahead; a kept chain keeps its clock")
	f.StringVar(&d.chainDir, "chain-dir", "", "keep the generated chain in this directory ("+DevnetChainFile+") and continue it when started again (run --devnet keeps it in its data directory)")
	// The flag's name before it was --chain-dir (it is the store's
	// directory everywhere else).
	f.StringVar(&d.chainDir, "data-dir", "", "the same as --chain-dir")
	_ = f.MarkHidden("data-dir")
	f.IntVar(&d.prefix, "prefix-blocks", 0, "serve only the first N blocks of the stored chain (--chain-dir or --replay) in the order they were made, forks included, until SIGUSR1 or --reveal-after reveals the rest (0: all of it)")
	f.DurationVar(&d.revealAfter, "reveal-after", 0, "with --prefix-blocks: reveal the rest of the stored chain after this long (0: on SIGUSR1 only)")
}

// check refuses the combinations of flags that make no sense.
func (d *devnetFlags) check(cmd *cobra.Command) error {
	if d.socket == "" {
		return usageErrorf("--socket is required")
	}
	if cmd.Flags().Changed("data-dir") {
		fmt.Fprintln(cmd.ErrOrStderr(), "marlowe-follower: devnet --data-dir is deprecated: use --chain-dir (--data-dir is the store's directory in the other commands)")
	}
	if d.chainDir != "" && d.replay != "" {
		return usageErrorf("--chain-dir keeps a generated chain; a --replay file is kept already")
	}
	if d.prefix < 0 {
		return usageErrorf("--prefix-blocks must not be negative")
	}
	if d.prefix > 0 && d.chainDir == "" && d.replay == "" {
		return usageErrorf("--prefix-blocks serves the beginning of a stored chain: give --chain-dir or --replay")
	}
	if d.revealAfter != 0 && d.prefix == 0 {
		return usageErrorf("--reveal-after goes with --prefix-blocks")
	}
	switch {
	case !cmd.Flags().Changed("network-magic"):
		d.settings.Magic = 0 // the genesis's, or 42
	case d.magic == 0 || d.magic > math.MaxUint32:
		return usageErrorf("--network-magic %d: want 1 to %d", d.magic, uint64(math.MaxUint32))
	default:
		d.settings.Magic = uint32(d.magic)
	}
	return nil
}

// run serves the devnet until the command's context ends.
func (d *devnetFlags) run(cmd *cobra.Command) error {
	if err := d.check(cmd); err != nil {
		return err
	}
	net, err := resolveDevnetNetwork(d.settings)
	if err != nil {
		return usageError{err}
	}
	if err := devnetClock(&d.gen, net, clockFlags{start: d.startTime, wall: d.wallClock, rate: d.rate,
		gapSet: cmd.Flags().Changed("slot-gap"), replay: d.replay != "", chainDir: d.chainDir}, time.Now()); err != nil {
		return err
	}
	d.gen.Mainnet = net.magic == devnet.MagicMainnet
	l, err := loadConfig(cmd)
	if err != nil {
		return err
	}
	ctx, log, done, err := startCommand(cmd, l)
	if err != nil {
		return err
	}
	defer done()
	chainFile := ""
	if d.chainDir != "" {
		if err := os.MkdirAll(d.chainDir, 0o750); err != nil {
			return err
		}
		chainFile = filepath.Join(d.chainDir, DevnetChainFile)
	}
	dn, err := devnet.Start(ctx, devnet.RunConfig{
		SocketPath: d.socket, NetworkMagic: net.magic, Generator: d.gen, Blocks: d.blocks, BlockRate: d.rate,
		Pregenerate: d.pregen, Replay: d.replay, Journal: d.journal, ChainFile: chainFile, PrefixBlocks: d.prefix, Logger: log,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "devnet node on %s (network magic %d); follow it with:\n  %s\n",
		d.socket, net.magic, followHint(d.socket, net, d.settings))
	if dn.Hidden() > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "serving the stored chain up to block %d; its %d other blocks on SIGUSR1 (kill -USR1 %d)%s\n",
			dn.Store().Tip().BlockNo, dn.Hidden(), os.Getpid(), revealNote(d.revealAfter))
		go revealOnSignal(ctx, dn, d.revealAfter, log)
	}
	return d.serve(ctx, dn, log)
}

// serve waits for the end: of the chain (then it serves it until
// stopped) or of ctx, and writes the generated activity (--activity).
func (d *devnetFlags) serve(ctx context.Context, dn *devnet.Devnet, log *zap.Logger) error {
	select {
	case <-dn.Done():
		if err := dn.Err(); err != nil {
			_ = dn.Close()
			return err
		}
		if err := d.writeActivity(dn); err != nil {
			return err
		}
		log.Info("chain complete, serving it until stopped", zap.Uint64("blocks", dn.Store().Tip().BlockNo))
		<-ctx.Done()
	case <-ctx.Done():
		if err := d.writeActivity(dn); err != nil {
			return err
		}
	}
	return dn.Close()
}

// writeActivity writes the generated Marlowe activity to --activity.
func (d *devnetFlags) writeActivity(dn *devnet.Devnet) error {
	if d.activity == "" {
		return nil
	}
	f, err := os.Create(d.activity)
	if err != nil {
		return err
	}
	if err := devnet.WriteActivity(f, dn.Activity()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// clockFlags are the devnet command's flags that choose the chain's clock.
type clockFlags struct {
	start    string  // --start-time
	wall     bool    // --wall-clock
	rate     float64 // --block-rate
	gapSet   bool    // --slot-gap given
	replay   bool    // --replay: no generated chain
	chainDir string  // --chain-dir: a kept chain keeps its clock
}

// devnetClock puts the generated chain on its clock: the wall clock
// (--wall-clock), another network's clock from --start-time, or on the
// devnet's own network the reference traces' times. A kept chain on a
// clock that starts from the time it is started (the wall clock, now)
// continues from where it began.
func devnetClock(gen *devnet.GeneratorConfig, net devnetNetwork, f clockFlags, now time.Time) error {
	switch {
	case f.replay && (f.wall || f.start != ""):
		return usageErrorf("--wall-clock and --start-time are for a generated chain; a --replay has its blocks' slots")
	case f.wall && f.start != "":
		return usageErrorf("--wall-clock makes every block at the time it is made; --start-time is for a chain made ahead of time")
	case f.wall && f.rate <= 0:
		return usageErrorf("--wall-clock makes blocks as time passes, at --block-rate: give a rate above 0")
	case f.wall:
		clock := net.clock
		if clock.IsZero() {
			clock = devnet.DevnetClock
		}
		gen.UseWallClock(clock, now, f.rate)
	case f.replay:
		return nil
	case !net.clock.IsZero():
		ms, err := net.startMillis(f.start, now)
		if err != nil {
			return usageError{err}
		}
		gap := gen.MeanSlotGap
		gen.UseClock(net.clock, ms)
		if f.gapSet {
			gen.MeanSlotGap = gap
		}
	case f.start != "":
		return usageErrorf("--start-time is for a generated chain on another network's clock (--network-magic)")
	default:
		return nil // the reference traces' times on the devnet's clock
	}
	if f.chainDir != "" && (f.wall || f.start == "" || f.start == "now") {
		// A kept chain began when it was made: continue it.
		if meta, err := devnet.ReadChainMeta(filepath.Join(f.chainDir, DevnetChainFile)); err == nil &&
			meta.Generator.Clock == gen.Clock && meta.Generator.WallClock == gen.WallClock {
			gen.KeepClockOf(meta.Generator)
		}
	}
	return nil
}

func revealNote(after time.Duration) string {
	if after > 0 {
		return fmt.Sprintf(" or in %s", after)
	}
	return ""
}

// revealOnSignal reveals the hidden rest of the stored chain on SIGUSR1
// or after the delay.
func revealOnSignal(ctx context.Context, dn *devnet.Devnet, after time.Duration, log *zap.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	defer signal.Stop(ch)
	var timer <-chan time.Time
	if after > 0 {
		t := time.NewTimer(after)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return
	case <-ch:
	case <-timer:
	}
	if _, err := dn.Reveal(0); err != nil {
		log.Error("revealing the stored chain", zap.Error(err))
	}
}
