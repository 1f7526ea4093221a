package history

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// presence is where the store's actor runs, across its incarnations:
// feeds find the running writer here and hear here of the next one while a
// supervisor restarts it.
type presence struct {
	mu       sync.Mutex
	system   *actor.ActorSystem
	pid      *actor.PID
	restart  bool              // the running writer's stop is a restart
	stopped  bool              // stopped for good: no writer follows
	notify   map[uint64]func() // called once at the next change (Feeds)
	notifyID uint64
	nextID   atomic.Uint64
}

// spawned records a writer spawned but maybe not started yet.
func (p *presence) spawned(system *actor.ActorSystem, pid *actor.PID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pid == nil {
		p.system, p.pid = system, pid
	}
}

// attach records the writer that started.
func (p *presence) attach(system *actor.ActorSystem, pid *actor.PID) {
	p.mu.Lock()
	p.system, p.pid, p.restart, p.stopped = system, pid, false, false
	fns := p.bump()
	p.mu.Unlock()
	run(fns)
}

// detach records that the writer pid stopped: for good unless a restart
// was announced.
func (p *presence) detach(pid *actor.PID) {
	p.mu.Lock()
	if p.pid != nil && !p.pid.Equal(pid) {
		p.mu.Unlock()
		return
	}
	p.pid = nil
	p.stopped = !p.restart
	fns := p.bump()
	p.mu.Unlock()
	run(fns)
}

func (p *presence) retire() {
	p.mu.Lock()
	if p.stopped && p.pid == nil {
		p.mu.Unlock()
		return
	}
	p.pid, p.restart, p.stopped = nil, false, true
	fns := p.bump()
	p.mu.Unlock()
	run(fns)
}

func (p *presence) expectRestart() {
	p.mu.Lock()
	p.restart = true
	p.mu.Unlock()
}

// bump signals a change; the caller runs the returned notifications
// after unlocking.
func (p *presence) bump() []func() {
	fns := make([]func(), 0, len(p.notify))
	for _, f := range p.notify {
		fns = append(fns, f)
	}
	p.notify = nil
	return fns
}

func run(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// state returns the running writer (nil between incarnations) and
// whether the store stopped for good.
func (p *presence) state() (*actor.ActorSystem, *actor.PID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.system, p.pid, p.stopped
}

// onChange calls f once at the next change, unless the returned cancel
// is called first.
func (p *presence) onChange(f func()) (cancel func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.notify == nil {
		p.notify = map[uint64]func(){}
	}
	p.notifyID++
	id := p.notifyID
	p.notify[id] = f
	return func() {
		p.mu.Lock()
		delete(p.notify, id)
		p.mu.Unlock()
	}
}

// send sends msg to the running writer, if any; false when none runs.
func (p *presence) send(msg any) bool {
	system, pid, _ := p.state()
	if pid != nil {
		system.Root.Send(pid, msg)
	}
	return pid != nil
}
