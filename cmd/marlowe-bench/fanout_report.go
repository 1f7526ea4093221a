package main

import (
	"fmt"
	"strings"
)

// renderFanout renders the fanout section's tables and how they stand
// against the targets of issue 21.
func renderFanout(w printf, r *Result) {
	if r.Storm == nil && len(r.Tip) == 0 {
		return
	}
	w("### Streaming at scale: the service binary\n\n")
	w("The service as an operator runs it: the `marlowe-follower` binary (commands below), on an embedded store, follows a ")
	w("devnet node (blocks with Marlowe activity, mean body %s bytes); the subscribers are WebSocket clients in a worker ",
		commas(float64(r.Sizes.MarloweBlockSize)))
	w("process, one connection and one stream each, every record (`{\"all\": true}`), ack mode, acknowledging every batch; the ")
	w("server is measured from outside (`/proc/PID`, `/metrics`). Raw subscribers are bare WebSockets that take the batch ")
	w("number and each record's seq and block out of the frame's text and ack (what a client cannot do without); Go ")
	w("subscribers use `streaming/client` as an application does. Everything shares the machine's cores.\n\n")
	for _, c := range r.Services {
		w("- `%s`\n", c)
	}
	w("\n")
	if s := r.Storm; s != nil {
		renderStorm(w, s)
	}
	if len(r.Tip) > 0 {
		renderTip(w, r)
	}
}

func renderStorm(w printf, s *StormResult) {
	w("**The storm.** %s subscribers subscribe from `0` of a %s-record log at the same moment. One subscriber alone ",
		commas(float64(s.Subscribers)), commas(float64(s.Records)))
	w("catching up over the same log on the same server, just before, is the baseline. The server's peak RSS (VmHWM, reset ")
	w("before the storm) is given above its RSS before the storm; \"in order\" counts the records that did not follow the ")
	w("previous one (a gap, a repeat or a step back). Limit: %s s.\n\n", trimFloat(s.LimitSeconds))
	w("| subscribers | records | caught up | out of order | seconds | deliveries/s | one subscriber, records/s | aggregate / one | first / median caught up, s | RSS before MiB | peak above MiB | RSS at the end / %s s later MiB | server CPU µs / delivery |\n",
		trimFloat(s.SettleSeconds))
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	w("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s / %s | %s |\n\n", commas(float64(s.Subscribers)),
		commas(float64(s.Records)), commas(float64(s.CaughtUp)), commas(float64(s.Disorder)), fixed(s.Seconds, 1),
		commas(s.DeliveriesPerSec), commas(s.SingleRecordsPerSec), fixed(s.VsSingle, 2), fixed(s.FirstDone, 1),
		fixed(s.MedianDone, 1), fixed(s.RSSBeforeMiB, 0), fixed(s.PeakAboveMiB, 0), fixed(s.RSSEndMiB, 0),
		fixed(s.RSSSettledMiB, 0), fixed(s.ServerCPUus, 1))
	w("Targets (issue 21): every subscriber caught up, every record once and in order: %s; peak at most 256 MiB above: %s; ",
		met(s.CaughtUp == s.Subscribers && s.Disorder == 0), met(s.PeakAboveMiB <= 256))
	w("aggregate at least 5x one subscriber: %s; ", met(s.VsSingle >= 5))
	// Given back: the RSS once the storm has passed (the subscribers still
	// connected, at the head) no more than a quarter of what the storm
	// took above the RSS before.
	w("memory given back once the storm passed (%s s later at most a quarter of the peak above the RSS before): %s (%s MiB, before %s).",
		trimFloat(s.SettleSeconds), met(s.RSSSettledMiB-s.RSSBeforeMiB <= s.PeakAboveMiB/4), fixed(s.RSSSettledMiB, 0), fixed(s.RSSBeforeMiB, 0))
	if s.FirstError != "" {
		w(" %d did not catch up; the first: %s.", s.Failed, s.FirstError)
	}
	w("\n\n")
}

func renderTip(w printf, r *Result) {
	w("**At the tip.** The node makes %s blocks/s; the subscribers start from the tip, then the window runs %s s; the ",
		trimFloat(r.Sizes.TipRate), trimFloat(r.Sizes.TipSeconds))
	w("records the service commits in it are followed until every subscriber has them (at most %s s more). The latency of a ",
		trimFloat(r.Sizes.TipDrainSeconds))
	w("record is from the moment its block reached the node's followers (an observer in the worker follows the node too) to ")
	w("the moment the subscriber had read the frame: it includes the service's own work on the block, whose commit time is ")
	w("given apart (its histogram's bucket bound). The phases run one after the other on one service: raw, Go, Go, raw, then ")
	w("the many raw ones. CPU per delivery is over the window and the drain; server RSS is the largest sampled in the window.\n\n")
	w("The service starts each phase at the tip, or as close as it got in a minute after the one before (\"behind\": ")
	w("blocks not yet committed when the phase began).\n\n")
	w("| client | subscribers | p50 ms | p99 ms | max ms | delivered / expected | out of order | commits / blocks made (behind) | commit p99 ms | server RSS MiB (before) | server CPU µs / delivery | client CPU µs / delivery | setup s |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var failed []string
	for _, t := range r.Tip {
		if t.Samples == 0 && t.FirstError != "" {
			w("| %s | %s | (failed) | | | | | | | %s | | | |\n", t.Client, commas(float64(t.Subscribers)), fixed(t.ServerRSSBeforeMiB, 0))
		} else {
			w("| %s | %s | %s | %s | %s | %s / %s | %s | %d / %d (%d) | %s | %s (%s) | %s | %s | %s |\n", t.Client,
				commas(float64(t.Subscribers)), fixed(t.P50Ms, 1), fixed(t.P99Ms, 1), fixed(t.MaxMs, 0), commas(float64(t.Delivered)),
				commas(float64(t.Expected)), commas(float64(t.Disorder)), t.Committed, t.NodeBlocks, t.BehindAtStart,
				trimFloat(t.CommitP99Ms), fixed(t.ServerRSSMiB, 0), fixed(t.ServerRSSBeforeMiB, 0), fixed(t.ServerCPUus, 1),
				fixed(t.ClientCPUus, 1), fixed(t.SetupSeconds, 1))
		}
		if t.FirstError != "" {
			failed = append(failed, fmt.Sprintf("%s %s: %d subscribers failed; the first: %s", commas(float64(t.Subscribers)), t.Client, t.Failed, t.FirstError))
		}
	}
	w("\n")
	for _, f := range failed {
		w("- %s\n", f)
	}
	if len(failed) > 0 {
		w("\n")
	}
	raws, gos := tipRows(r.Tip, clientRaw, r.Sizes.TipSubscribers), tipRows(r.Tip, clientGo, r.Sizes.TipSubscribers)
	var p99, cpu []float64
	for i := range min(len(raws), len(gos)) {
		p99 = append(p99, ratio(gos[i].P99Ms, raws[i].P99Ms))
		cpu = append(cpu, ratio(gos[i].ClientCPUus, raws[i].ClientCPUus))
	}
	if len(p99) > 0 {
		w("Go client against raw, each Go phase with the raw one next to it: p99 %s, client CPU per delivery %s. ",
			spanX(p99), spanX(cpu))
		worst := 0.0
		for _, x := range p99 {
			worst = max(worst, x)
		}
		w("Target: within 1.5x of raw: %s.\n\n", met(worst <= 1.5))
	}
	w("Targets at the tip: ")
	var parts []string
	for _, t := range raws {
		parts = append(parts, fmt.Sprintf("%s raw, p99 under 50 ms: %s (%s ms)", commas(float64(t.Subscribers)), met(t.P99Ms < 50), fixed(t.P99Ms, 1)))
	}
	for _, t := range tipRows(r.Tip, clientRaw, r.Sizes.TipManySubscribers) {
		parts = append(parts, fmt.Sprintf("%s raw, RSS under 1 GiB: %s (%s MiB), p99 under 100 ms: %s (%s ms), every record delivered: %s, commit rate kept: %s (%d of %d blocks)",
			commas(float64(t.Subscribers)), met(t.ServerRSSMiB < 1024), fixed(t.ServerRSSMiB, 0), met(t.P99Ms < 100), fixed(t.P99Ms, 1),
			met(t.Delivered == t.Expected), met(float64(t.Committed) >= 0.95*float64(t.NodeBlocks)), t.Committed, t.NodeBlocks))
	}
	w("%s.\n\n", strings.Join(parts, "; "))
}

// tipRows returns the rows of a client kind with n subscribers, in order.
func tipRows(rows []TipRow, kind string, n int) []TipRow {
	var out []TipRow
	for _, t := range rows {
		if t.Client == kind && t.Subscribers == n {
			out = append(out, t)
		}
	}
	return out
}

// spanX formats ratios as their range: "1.21x" or "1.21-1.48x".
func spanX(xs []float64) string {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	if fixed(lo, 2) == fixed(hi, 2) {
		return fixed(lo, 2) + "x"
	}
	return fixed(lo, 2) + "-" + fixed(hi, 2) + "x"
}

// met says whether a target was met.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}
