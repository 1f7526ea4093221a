// Package metrics is the process's Prometheus registry and the metrics of
// the service's parts, read when scraped: nothing is added to their hot
// paths.
package metrics

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/processor"
	"github.com/marlowe-follower/follower/history/storage"
)

// Metrics is the process's Prometheus registry with the follower's and the
// store's metrics. Components with their own metrics (query latency,
// streaming) register on Registry too.
type Metrics struct {
	Registry      *prometheus.Registry
	CommitSeconds prometheus.Histogram
	// LeaseRenewals times the writer lease's renewals, by result (ok,
	// failed, lost).
	LeaseRenewals *prometheus.HistogramVec
}

// New registers the Go runtime and process collectors, the commit latency
// histogram and the writer lease's renewal latency.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "marlowe_store_commit_seconds", Help: "Time to commit one batch of history records.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	m.LeaseRenewals = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "marlowe_writer_lease_renewal_seconds", Help: "Time to renew the writer lease (one UPDATE on its own connection), " +
			"by result: ok, failed (retried) or lost (another process took the lease).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"result"})
	for _, r := range []string{"ok", "failed", "lost"} {
		m.LeaseRenewals.WithLabelValues(r)
	}
	reg.MustRegister(m.CommitSeconds, m.LeaseRenewals)
	return m
}

// ObserveLeaseRenewal counts a renewal of the writer lease
// (storage.LeaseOptions.Renewed).
func (m *Metrics) ObserveLeaseRenewal(took time.Duration, err error) {
	result := "ok"
	switch {
	case errors.Is(err, storage.ErrLeaseLost):
		result = "lost"
	case err != nil:
		result = "failed"
	}
	m.LeaseRenewals.WithLabelValues(result).Observe(took.Seconds())
}

// RegisterRole exposes the process's role (marlowe_role{role}, 1) and, on
// a process writing PostgreSQL (w set), its writer lease:
// marlowe_writer_lease_held (1 while held, 0 standing by) and
// marlowe_writer_epoch (the epoch taken with it, 0 before).
func (m *Metrics) RegisterRole(role string, w Writer) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "marlowe_role",
		Help: "1, labelled with the process's role: all, writer or reader.", ConstLabels: prometheus.Labels{"role": role}},
		func() float64 { return 1 }))
	if w == nil {
		return
	}
	m.Registry.MustRegister(
		gaugeFunc("marlowe_writer_lease_held",
			"1 while this process holds the writer lease and may commit; 0 while it stands by (or its lease lapsed).",
			func() float64 { return oneIf(w.Held()) }),
		gaugeFunc("marlowe_writer_epoch", "The writer epoch this process took with the writer lease (0 before it holds it).",
			func() float64 { return float64(w.Epoch()) }),
		gaugeFunc("marlowe_writer_lease_session_locked",
			"1 while this process's lease connection holds the writer lease's session lock: holding the lease, a standby takes over the moment this process or its session dies (0: only the expiry decides, as behind a pooling proxy).",
			func() float64 { return oneIf(w.Held() && w.SessionLocked()) }),
	)
}

// Writer is what the writer metrics read of a process that writes
// PostgreSQL.
type Writer interface {
	// Held reports whether the process holds the writer lease and may
	// commit.
	Held() bool
	// Epoch is the writer epoch taken with the lease (0 before).
	Epoch() int64
	// SessionLocked reports whether the lease's connection holds its
	// session lock.
	SessionLocked() bool
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// RegisterFollower exposes the follower's progress. The values are read when
// scraped: nothing is added to the follower's hot path.
func (m *Metrics) RegisterFollower(p *chainsync.Progress) {
	gauge := func(name, help string, f func(chainsync.ProgressSnapshot) float64) {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return f(p.Snapshot()) }))
	}
	counter := func(name, help string, f func(chainsync.ProgressSnapshot) float64) {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return f(p.Snapshot()) }))
	}
	gauge("marlowe_chain_slot", "Slot of the newest block followed.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Point.Slot) })
	gauge("marlowe_chain_block_number", "Number of the newest block followed.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Point.BlockNo) })
	gauge("marlowe_node_tip_slot", "Slot of the node's tip.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Tip.Point.Slot) })
	gauge("marlowe_node_tip_block_number", "Number of the node's tip block.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Tip.BlockNo) })
	gauge("marlowe_sync_progress_ratio", "Followed slot over the node's tip slot.", func(s chainsync.ProgressSnapshot) float64 { return s.Fraction() })
	gauge("marlowe_sync_blocks_behind", "Blocks between the followed point and the node's tip.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.BlocksBehind()) })
	gauge("marlowe_node_connected", "1 while connected to the node.", func(s chainsync.ProgressSnapshot) float64 { return oneIf(s.Connected) })
	gauge("marlowe_chainsync_waiting_for_node", "1 while the node's tip is behind the follower's point and the follower waits for it.",
		func(s chainsync.ProgressSnapshot) float64 { return oneIf(s.Waiting != nil) })
	gauge("marlowe_chainsync_node_behind_blocks", "While waiting for the node: how many blocks its tip is behind the follower's point (0 otherwise).",
		func(s chainsync.ProgressSnapshot) float64 {
			if s.Waiting != nil {
				return float64(s.Waiting.BlocksBehind())
			}
			return 0
		})
	gauge("marlowe_chainsync_diverged", "1 once following stopped because the node's chain and the stored history part (operator action needed).",
		func(s chainsync.ProgressSnapshot) float64 { return oneIf(s.Diverged != nil) })
	gauge("marlowe_rollback_last_depth_blocks", "Depth of the newest rollback, in blocks.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.LastRollback) })
	counter("marlowe_blocks_total", "Blocks rolled forward (use rate() for blocks per second).", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Blocks) })
	counter("marlowe_block_bytes_total", "Raw bytes of the blocks rolled forward.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Bytes) })
	counter("marlowe_blocks_decoded_total", "Blocks whose transactions were decoded (the prefilter matched).", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Decoded) })
	counter("marlowe_transactions_total", "Marlowe transactions found.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.MarloweTxs) })
	counter("marlowe_decode_failures_total", "Blocks or transactions that could not be decoded.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.DecodeFailures) })
	counter("marlowe_rollbacks_total", "Rollbacks received from the node.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Rollbacks) })
	counter("marlowe_node_connection_attempts_total", "Attempts to connect to the node.", func(s chainsync.ProgressSnapshot) float64 { return float64(s.Attempts) })
	m.Registry.MustRegister(&labelledCounters{
		desc: prometheus.NewDesc("marlowe_chainsync_handshake_failures_total",
			"Handshakes with the node that failed, by reason: network_magic (the node is on another network), version (no common "+
				"protocol version), decode, refused (another reason the node gave), closed (closed without a reason), timeout.",
			[]string{"reason"}, nil),
		labels: chainsync.HandshakeReasons,
		values: func() map[string]uint64 { return p.Snapshot().HandshakeFailures },
	})
}

// RegisterProcessor exposes the history processor's counters.
func (m *Metrics) RegisterProcessor(p *processor.Processor) {
	m.Registry.MustRegister(&labelledCounters{
		desc: prometheus.NewDesc("marlowe_rejected_outputs_total",
			"Outputs to a Marlowe validator that cannot be followed (no contract can start from them), each counted once, by "+
				"reason: datum_missing (no datum, or its hash without the datum), datum_undecodable (not Plutus Data), "+
				"datum_not_marlowe_data, other.",
			[]string{"reason"}, nil),
		labels: processor.RejectReasons,
		values: p.RejectedOutputs,
	})
}

// labelledCounters exposes counters kept in a map, one series per label
// value (every listed value, zero included, so that rate() sees the first
// increase).
type labelledCounters struct {
	desc   *prometheus.Desc
	labels []string
	values func() map[string]uint64
}

func (c *labelledCounters) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *labelledCounters) Collect(ch chan<- prometheus.Metric) {
	values := c.values()
	for _, l := range c.labels {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(values[l]), l)
	}
}

// RegisterStore exposes the history store's counters.
func (m *Metrics) RegisterStore(st *history.StoreStats) {
	m.Registry.MustRegister(
		gaugeFunc("marlowe_history_head_seq", "Seq of the newest committed record.", func() float64 { return float64(st.Head.Load()) }),
		counterFunc("marlowe_history_records_committed_total", "History records committed.", st.RecordsCommitted.Load),
		counterFunc("marlowe_history_blocks_committed_total", "Blocks committed (their checkpoint).", st.BlocksCommitted.Load),
		counterFunc("marlowe_history_commits_total", "Successful commits.", st.Commits.Load),
		counterFunc("marlowe_history_commit_failures_total", "Failed commits (retried).", st.CommitFailures.Load),
		gaugeFunc("marlowe_history_commit_failing", "1 while the history store's commits fail.", func() float64 { return oneIf(st.Failing.Load()) }),
		gaugeFunc("marlowe_history_committed_block_number", "Number of the newest committed block (where a restart resumes).",
			func() float64 {
				if h := st.Committed.Load(); h != nil {
					return float64(h.BlockNo)
				}
				return 0
			}),
		gaugeFunc("marlowe_history_live_subscribers", "Subscriptions receiving records live.", func() float64 { return float64(st.LiveSubscribers.Load()) }),
		counterFunc("marlowe_history_live_dropped_total", "Live subscriptions sent back to catch up because they fell behind.", st.LiveDropped.Load),
		counterFunc("marlowe_history_live_replayed_total", "Go-live requests taken behind the head, with the records the subscription missed from the store's recent records.",
			st.LiveReplayed.Load),
		counterFunc("marlowe_history_live_refused_total", "Go-live requests sent back to catch up first: further behind the head than the store's recent records reach.",
			st.LiveRefused.Load),
	)
}

// RegisterLeaseWatch exposes a reader's look at the writer lease.
func (m *Metrics) RegisterLeaseWatch(w *storage.LeaseWatch) {
	m.Registry.MustRegister(
		gaugeFunc("marlowe_reader_writer_present",
			"1 while the writer lease runs, as this reader last read it (0 once it has expired or its holder's session has ended: nobody writes; 0 also before the first read).",
			func() float64 {
				v := w.View()
				return oneIf(v != nil && !v.NoWriter(time.Now()))
			}),
		gaugeFunc("marlowe_reader_writer_lease_renewal_age_seconds",
			"Age of the writer lease's last renewal, as this reader last read it (0 before the first read).",
			func() float64 {
				if v := w.View(); v != nil {
					return v.RenewalAge(time.Now()).Seconds()
				}
				return 0
			}),
		counterFunc("marlowe_reader_writer_lease_read_failures_total", "Failed reads of the writer lease.", w.Failures),
	)
}

// RegisterMirror exposes a reader's counters: its head beside the
// writer's, the commit notices and polls that moved it, the listening
// connection, and a replica's lag.
func (m *Metrics) RegisterMirror(mr *history.Mirror) {
	st := mr.Stats()
	writerHead := func() float64 {
		if p := st.Writer.Load(); p != nil {
			return float64(p.Head)
		}
		return 0
	}
	m.Registry.MustRegister(
		gaugeFunc("marlowe_reader_writer_head_seq", "The writer's committed head as this reader last noticed or read it.", writerHead),
		gaugeFunc("marlowe_reader_lag_records", "Records the writer has committed that this reader has not delivered yet.",
			func() float64 { return max(0, writerHead()-float64(mr.Store().Stats().Head.Load())) }),
		gaugeFunc("marlowe_reader_listening", "1 while a connection listens for the writer's commit notices (else the reader polls).",
			func() float64 { return oneIf(st.Listening.Load()) }),
		counterFunc("marlowe_reader_notices_total", "Commit notices received.", st.Notices.Load),
		counterFunc("marlowe_reader_bad_notices_total", "Notifications on the commit channel that were not commit notices.", st.BadNotices.Load),
		counterFunc("marlowe_reader_polls_total", "Timed polls of the writer's progress.", st.Polls.Load),
		counterFunc("marlowe_reader_notice_reads_total", "Reads of new records started by a commit notice.", st.NoticeReads.Load),
		counterFunc("marlowe_reader_poll_reads_total", "Reads of new records started by a poll (a lost notice, or no listening connection).", st.PollReads.Load),
		counterFunc("marlowe_reader_retry_reads_total", "Reads of new records started while the replica replayed what the writer committed.", st.RetryReads.Load),
		counterFunc("marlowe_reader_records_total", "Records read and delivered.", st.Records.Load),
		counterFunc("marlowe_reader_listen_connects_total", "Listening connections made.", st.ListenConnects.Load),
		counterFunc("marlowe_reader_listen_failures_total", "Listening connections lost or refused.", st.ListenFailures.Load),
		counterFunc("marlowe_reader_read_failures_total", "Failed reads of the databases.", st.ReadFailures.Load),
	)
	if mr.Replica() {
		m.Registry.MustRegister(
			gaugeFunc("marlowe_reader_replica_lag_records", "Records the replica is behind the writer's head.",
				func() float64 { return max(0, writerHead()-float64(st.ReadHead.Load())) }),
			gaugeFunc("marlowe_reader_replica_lag_bytes", "Bytes of write-ahead log the replica has still to replay (-1: unknown).",
				func() float64 { return float64(st.LagBytes.Load()) }),
		)
	}
}

// gaugeFunc is a gauge that reads f when scraped.
func gaugeFunc(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// counterFunc is a counter that reads load when scraped.
func counterFunc(name, help string, load func() uint64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(load()) })
}

// oneIf is a gauge's value for a condition: 1 while it holds, else 0.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
