package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"
)

// workerEnv, set to 1, makes the program a worker: it reads one job from
// stdin, runs it, and writes its result as JSON to stdout. Each measurement
// runs in a fresh worker process so that its CPU time, peak RSS and heap
// start from nothing and no case inherits another's garbage.
const workerEnv = "MARLOWE_BENCH_WORKER"

// profileEnv, when set, is the file a worker writes its CPU profile to.
const profileEnv = "MARLOWE_BENCH_CPUPROFILE"

// job is what a worker is asked to do.
type job struct {
	Kind   string          `json:"kind"`
	Params json.RawMessage `json:"params"`
}

// workerKinds maps a job kind to its function: it decodes its params from
// raw (jobOf) and returns its result.
var workerKinds = map[string]func(ctx context.Context, raw json.RawMessage) (any, error){
	"follow":         jobOf(runFollowJob),
	"streamCatchUp":  jobOf(runCatchUpJob),
	"streamLatency":  jobOf(runLatencyJob),
	"fanoutStorm":    jobOf(runStormJob),
	"fanoutTip":      jobOf(runTipJob),
	"contractsPhase": jobOf(runContractsJob),
	"chainGrowth":    jobOf(runChainGrowthJob),
}

// isWorker reports whether this process was started as a worker.
func isWorker() bool { return os.Getenv(workerEnv) == "1" }

// workerMain runs the job on stdin and returns the exit code.
func workerMain() int {
	var j job
	if err := json.NewDecoder(os.Stdin).Decode(&j); err != nil {
		fmt.Fprintln(os.Stderr, "marlowe-bench worker: reading the job:", err)
		return 2
	}
	run, ok := workerKinds[j.Kind]
	if !ok {
		fmt.Fprintln(os.Stderr, "marlowe-bench worker: unknown job", j.Kind)
		return 2
	}
	if path := os.Getenv(profileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "marlowe-bench worker:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "marlowe-bench worker:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	res, err := run(context.Background(), j.Params)
	if err != nil {
		fmt.Fprintf(os.Stderr, "marlowe-bench worker: %s: %v\n", j.Kind, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "marlowe-bench worker:", err)
		return 1
	}
	return 0
}

// jobOf is the worker's function of a job: it decodes the job's params from
// raw and runs it on them.
func jobOf[P any](run func(ctx context.Context, p P) (any, error)) func(ctx context.Context, raw json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var p P
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		return run(ctx, p)
	}
}

// runWorker runs a job in a new worker process (the executable exe) and
// decodes its result into out. The worker's stderr (its progress) goes to
// this process's stderr. env is added to the worker's environment.
func runWorker(ctx context.Context, exe, kind string, params, out any, env ...string) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	in, err := json.Marshal(job{Kind: kind, Params: raw})
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), workerEnv+"=1"), env...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting a worker: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
		if err == nil {
			err = ctx.Err()
		}
	}
	if err != nil {
		return fmt.Errorf("worker %s: %w", kind, err)
	}
	if err := json.NewDecoder(&stdout).Decode(out); err != nil {
		return fmt.Errorf("worker %s: reading its result: %w", kind, err)
	}
	return nil
}

// writeHeapProfile writes a heap profile beside the worker's CPU profile
// (with the suffix name.heap) when profiling is on: jobs call it at the end
// of their measurement, before they stop what they measured, and the chain
// growth job at each checkpoint.
func writeHeapProfile(name string) {
	path := os.Getenv(profileEnv)
	if path == "" {
		return
	}
	runtime.GC()
	f, err := os.Create(path + name + ".heap")
	if err != nil {
		progress("heap profile: %v", err)
		return
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		progress("heap profile: %v", err)
	}
	_ = f.Close()
}

// progress writes a progress line to stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
