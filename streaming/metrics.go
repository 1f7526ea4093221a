package streaming

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	connections   prometheus.Gauge
	subscribers   prometheus.Gauge
	sseClients    prometheus.Gauge
	batchesSent   *prometheus.CounterVec
	recordsSent   prometheus.Counter
	acks          prometheus.Counter
	nacks         prometheus.Counter
	redeliveries  prometheus.Counter
	staleAcks     prometheus.Counter
	badFrames     *prometheus.CounterVec
	disconnects   *prometheus.CounterVec
	slowDropped   prometheus.Counter
	ackTimeouts   prometheus.Counter
	storeFailures prometheus.Counter
	leaseWaits    prometheus.Counter
	leasesLost    prometheus.Counter
	budgetCuts    prometheus.Counter
	queued        prometheus.GaugeFunc
	lag           *lagCollector
}

func newMetrics(s *Server) *metrics {
	const ns, sub = "marlowe", "streaming"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	return &metrics{
		connections: gauge("connections", "Open WebSocket connections."),
		subscribers: gauge("subscribers", "Subscriptions on open WebSocket connections."),
		sseClients:  gauge("sse_clients", "Open Server-Sent Events streams."),
		batchesSent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "batches_sent_total",
			Help: "Batch frames queued for sending, by delivery mode."}, []string{"mode"}),
		recordsSent:  counter("records_sent_total", "Records in batch frames queued for sending (redeliveries included)."),
		acks:         counter("acks_total", "Batches acknowledged."),
		nacks:        counter("nacks_total", "Batches refused by the client (nack)."),
		redeliveries: counter("redeliveries_total", "Batches sent again after a nack, a lost connection or an ack timeout."),
		staleAcks:    counter("stale_acks_total", "Acks and nacks of batches not in flight, ignored."),
		badFrames: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "bad_frames_total",
			Help: "Frames answered with an error frame, by error code."}, []string{"code"}),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "disconnects_total",
			Help: "Connections closed by the server, by reason."}, []string{"reason"}),
		slowDropped:   counter("slow_clients_dropped_total", "Connections closed because the client did not read (slow consumer)."),
		ackTimeouts:   counter("ack_timeouts_total", "Round trips ended because the ack did not come in time."),
		storeFailures: counter("stream_store_failures_total", "Failed writes of durable stream cursors."),
		leaseWaits: counter("lease_waits_total",
			"Batches of a durable stream held back because another process had a batch of it in flight (round-trip leases, several processes on one database)."),
		leasesLost: counter("leases_lost_total",
			"Round trips of a durable stream ended because this process's lease lapsed or was refused (its acknowledgement does not move the cursor; the records go out again)."),
		budgetCuts: counter("queue_budget_cuts_total",
			"Connections closed because the frames queued on all connections reached the queue budget (the largest queues first)."),
		queued: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "queued_bytes",
			Help: "Bytes of frames queued or being written on all connections (bounded by the queue budget)."},
			func() float64 { now, _ := s.budget.Bytes(); return float64(now) }),
		lag: &lagCollector{s: s},
	}
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.connections, m.subscribers, m.sseClients, m.batchesSent, m.recordsSent,
		m.acks, m.nacks, m.redeliveries, m.staleAcks, m.badFrames, m.disconnects, m.slowDropped, m.ackTimeouts,
		m.storeFailures, m.leaseWaits, m.leasesLost, m.budgetCuts, m.queued, m.lag} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) unregister(r prometheus.Registerer) {
	for _, c := range []prometheus.Collector{m.connections, m.subscribers, m.sseClients, m.batchesSent, m.recordsSent,
		m.acks, m.nacks, m.redeliveries, m.staleAcks, m.badFrames, m.disconnects, m.slowDropped, m.ackTimeouts,
		m.storeFailures, m.leaseWaits, m.leasesLost, m.budgetCuts, m.queued, m.lag} {
		r.Unregister(c)
	}
}

var (
	// Streams are labelled by owner, never by name: /metrics may be public
	// and a stream's name is what another client would need to steal it.
	lagDesc = prometheus.NewDesc("marlowe_streaming_stream_lag",
		"The largest lag (head seq - acknowledged cursor seq) of the durable streams of one owner (a token's name; "+
			"anonymous on an open server).",
		[]string{"owner"}, nil)
	maxLagDesc = prometheus.NewDesc("marlowe_streaming_max_lag",
		"The largest lag (head seq - acknowledged cursor seq; in broadcast mode the cursor sent) of the running subscriptions.", nil, nil)
)

// lagCollector computes stream lags when scraped.
type lagCollector struct{ s *Server }

// Describe implements prometheus.Collector.
func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- maxLagDesc
}

// Collect implements prometheus.Collector.
func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	head := l.s.head()
	var maxLag int64
	byOwner := map[string]int64{}
	l.s.running.Range(func(_, v any) bool {
		ref := v.(*streamRef)
		st := ref.stats.Load()
		if ref.durable {
			owner := ref.owner
			if owner == "" {
				owner = "anonymous"
			}
			byOwner[owner] = max(byOwner[owner], head-st.Acked.Seq, 0)
		}
		if st.Running {
			maxLag = max(maxLag, head-st.Acked.Seq)
		}
		return true
	})
	for owner, lag := range byOwner {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag), owner)
	}
	ch <- prometheus.MustNewConstMetric(maxLagDesc, prometheus.GaugeValue, float64(maxLag))
}
