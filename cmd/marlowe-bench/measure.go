package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cpuSeconds returns the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
}

// meter measures a stretch of a job from its start: the wall time, this
// process's CPU time and, on PostgreSQL (db, the store's database; "" on
// SQLite), the CPU time of the server processes serving db.
type meter struct {
	cpu0  float64
	start time.Time
	db    string
	pg0   float64
}

// startMeter starts measuring.
func startMeter(db string) meter {
	m := meter{cpu0: cpuSeconds(), start: time.Now(), db: db}
	if db != "" {
		m.pg0 = postgresBackendCPU(db)
	}
	return m
}

// elapsed returns the wall and CPU seconds since the start.
func (m meter) elapsed() (secs, cpu float64) {
	return time.Since(m.start).Seconds(), cpuSeconds() - m.cpu0
}

// postgresCPU returns the PostgreSQL server's CPU seconds since the start
// (0 on SQLite).
func (m meter) postgresCPU() float64 {
	if m.db == "" {
		return 0
	}
	return postgresBackendCPU(m.db) - m.pg0
}

// tvSeconds converts a timeval to seconds.
func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// memStatus is this process's resident set size now and at its peak, in
// bytes, from /proc/self/status (VmRSS and VmHWM).
type memStatus struct {
	RSS  int64
	Peak int64
}

// readMem reads /proc/self/status.
func readMem() memStatus { return readMemOf("/proc/self/status") }

// readMemOf reads the memory lines of a /proc/PID/status file.
func readMemOf(path string) memStatus {
	raw, err := os.ReadFile(path)
	if err != nil {
		return memStatus{}
	}
	var m memStatus
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			m.RSS = statusKB(line)
		case strings.HasPrefix(line, "VmHWM:"):
			m.Peak = statusKB(line)
		}
	}
	return m
}

// statusKB parses a "Name:   1234 kB" line of /proc/PID/status into bytes.
func statusKB(line string) int64 {
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.ParseInt(f[1], 10, 64)
	return n * 1024
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat times
// (100 on every Linux architecture Go runs on).
const clockTicks = 100

// postgresBackendCPU sums the CPU seconds of the PostgreSQL server
// processes that serve database db (their process title is
// "postgres: USER DB HOST(PORT) STATE"). It sees only local servers whose
// /proc entries are readable; it returns 0 otherwise.
func postgresBackendCPU(db string) float64 {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := []byte(" " + db + " ")
	var total float64
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(cmd, []byte("postgres: ")) || !bytes.Contains(cmd, want) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name in parentheses: state is field 3,
		// utime and stime are fields 14 and 15.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (ut + st) / clockTicks
	}
	return total
}

// goMemory returns the bytes of Go heap objects and of all the memory the
// Go runtime holds and has not released, from runtime/metrics (no
// stop-the-world).
func goMemory() (heap, total int64) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	value := func(s metrics.Sample) int64 {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s.Value.Uint64())
	}
	return value(samples[0]), value(samples[1]) - value(samples[2])
}

// Sample is one observation of a run in progress.
type Sample struct {
	Seconds float64 `json:"seconds"` // since the start of the measurement
	Blocks  uint64  `json:"blocks"`
	Records uint64  `json:"records,omitempty"`
	CPU     float64 `json:"cpuSeconds"`
	RSS     int64   `json:"rssBytes"`
	// GoHeap is the Go heap's live and not yet swept objects; GoRuntime
	// all the memory the Go runtime holds from the system and has not
	// released (heap, stacks, metadata). RSS beyond GoRuntime is memory the
	// Go runtime does not manage.
	GoHeap    int64 `json:"goHeapBytes"`
	GoRuntime int64 `json:"goRuntimeBytes"`
	// StoreBytes is the size of the store on disk, where it was measured.
	StoreBytes int64 `json:"storeBytes,omitempty"`
}

// sampler records Samples at a fixed period while a run goes on.
type sampler struct {
	start   time.Time
	cpu0    float64
	observe func(*Sample)
	stop    chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	samples []Sample
}

// startSampler samples every period; observe fills in the run's counters.
func startSampler(period time.Duration, observe func(*Sample)) *sampler {
	s := &sampler{start: time.Now(), cpu0: cpuSeconds(), observe: observe, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.take()
			}
		}
	}()
	return s
}

// take records one sample now.
func (s *sampler) take() Sample {
	smp := Sample{Seconds: time.Since(s.start).Seconds(), CPU: cpuSeconds() - s.cpu0, RSS: readMem().RSS}
	smp.GoHeap, smp.GoRuntime = goMemory()
	if s.observe != nil {
		s.observe(&smp)
	}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
	return smp
}

// finish stops sampling, takes a last sample and returns them all.
func (s *sampler) finish() []Sample {
	close(s.stop)
	<-s.done
	s.take()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// add records durations.
func (l *latencies) add(d ...time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// quantiles returns the p50 and p99 and the count, in milliseconds.
func (l *latencies) quantiles() (p50, p99 float64, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.d)
	return quantileMs(l.d, 0.5), quantileMs(l.d, 0.99), len(l.d)
}

// maxMs returns the largest duration, in milliseconds.
func (l *latencies) maxMs() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	return float64(slices.Max(l.d).Nanoseconds()) / 1e6
}

// quantileMs returns the q-quantile of sorted durations in milliseconds
// (nearest rank).
func quantileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, max(0, int(q*float64(len(sorted))+0.5)-1))
	return float64(sorted[i].Nanoseconds()) / 1e6
}

// dirSize is the total size of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// firstLine returns the rest of the first line of text that starts with
// prefix, trimmed.
func firstLine(text, prefix string) string {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return strings.TrimSpace(strings.TrimPrefix(sc.Text(), prefix))
		}
	}
	return ""
}
