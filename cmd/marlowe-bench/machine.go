package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a run was measured.
type Machine struct {
	CPU        string  `json:"cpu"`
	Cores      int     `json:"cores"`
	MemoryGiB  float64 `json:"memoryGiB"`
	GoVersion  string  `json:"goVersion"`
	OS         string  `json:"os"`
	Kernel     string  `json:"kernel,omitempty"`
	PostgreSQL string  `json:"postgresql,omitempty"`
	// LoadAverage is the 1-minute load average when the run started: the
	// machine may be shared.
	LoadAverage float64   `json:"loadAverage"`
	Date        time.Time `json:"date"`
}

// describeMachine reads the machine's description from /proc.
func describeMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Truncate(time.Second)}
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = strings.TrimSpace(strings.TrimPrefix(firstLine(string(raw), "model name"), ":"))
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb := firstLine(string(raw), "MemTotal:"); kb != "" {
			if n, err := strconv.ParseFloat(strings.Fields(kb)[0], 64); err == nil {
				m.MemoryGiB = n / (1 << 20)
			}
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(raw))
	}
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(raw)); len(f) > 0 {
			m.LoadAverage, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	return m
}
