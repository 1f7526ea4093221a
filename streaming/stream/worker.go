package stream

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// dbWorker does a durable stream's database work (taking, renewing and
// releasing its round-trip lease, storing its acknowledgements) on a
// goroutine of its own, one job at a time in the order the stream handed
// them over, and answers the stream by message: an ack or a Terminated in
// the stream's mailbox never waits behind SQL. The goroutine runs while
// jobs wait and ends when none is left; the server waits for the last one
// (Deps.Workers): the lease a stopping stream gives back.
type dbWorker struct {
	sys  *actor.ActorSystem
	self *actor.PID
	wg   *sync.WaitGroup

	mu      sync.Mutex
	jobs    []dbJob
	running bool
}

// dbJob is one piece of database work; it returns the answer the stream
// gets (nil: none).
type dbJob func(ctx context.Context) any

// dbTimeout bounds one job.
const dbTimeout = 10 * time.Second

// do hands a job over; it never waits.
func (w *dbWorker) do(job dbJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.jobs = append(w.jobs, job)
	if !w.running {
		w.running = true
		w.wg.Add(1)
		go w.run()
	}
}

func (w *dbWorker) run() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		if len(w.jobs) == 0 {
			w.running = false
			w.jobs = nil
			w.mu.Unlock()
			return
		}
		job := w.jobs[0]
		w.jobs[0] = nil
		w.jobs = w.jobs[1:]
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		ans := job(ctx)
		cancel()
		if ans != nil {
			wire.Tell(w.sys, w.self, ans) // nothing once the stream has stopped
		}
	}
}
