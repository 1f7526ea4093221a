package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/streaming"
)

// root is the pipeline's actor: it spawns the children, is their
// supervisor (it implements actor.SupervisorStrategy, so protoactor hands
// it their failures on its own goroutine) and stops them in order. A
// child is stopped by a step of a plan: poisoned (it takes what is in its
// mailbox first) or, when it failed, stopped; the next step waits for
// the child's Terminated. Plans run one at a time.
type root struct {
	p       *Pipeline
	ctx     actor.Context
	started chan struct{}

	alive    map[string]Role // children by PID id
	failures map[Role][]time.Time

	plan       []step
	waiting    *actor.PID    // the child whose Terminated the plan waits for
	then       func()        // after the plan's last step
	queued     []plan        // plans waiting for the current one
	restarting map[Role]bool // groups (by first role) with a restart planned
	stopping   bool
}

type step struct {
	pid    *actor.PID
	poison bool // else stop (a failed child)
}

type plan struct {
	steps []step
	then  func()
}

// Messages of the root.
type (
	stopRequest  struct{}
	childRequest struct {
		role  Role
		start bool
		done  chan error
	}
)

// The groups a failure restarts together.
func (r *root) ingest() []Role {
	if r.p.Mirror != nil {
		return []Role{Store}
	}
	if r.p.Store == nil {
		return []Role{Follower, Sink}
	}
	return []Role{Follower, Processor, Store}
}

func (r *root) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		r.ctx = c
		r.spawnIngest()
		if r.p.Projection != nil {
			r.respawn(Projection)
		}
		if r.p.cfg.Streaming != nil {
			r.respawn(Streamer)
		}
		close(r.started)
	case *stopRequest:
		r.stop(nil)
	case *childRequest:
		r.child(msg)
	case *actor.Terminated:
		role, ok := r.alive[msg.Who.Id]
		if !ok {
			return
		}
		delete(r.alive, msg.Who.Id)
		if role == Streamer {
			if srv := r.p.streaming.Load(); srv != nil {
				select {
				case <-srv.Done():
					r.p.streaming.CompareAndSwap(srv, nil)
				default:
				}
			}
		}
		r.p.mu.Lock()
		if r.p.children[role] != nil && r.p.children[role].Equal(msg.Who) {
			delete(r.p.children, role)
		}
		r.p.mu.Unlock()
		if r.waiting != nil && r.waiting.Equal(msg.Who) {
			r.waiting = nil
			r.advance()
		}
	case *actor.Stopped:
		if r.p.Store != nil {
			r.p.Store.Retire() // no writer follows: subscriptions end
		}
		close(r.p.done)
	}
}

// spawnIngest spawns the chain from its end: the store, the processor,
// the follower (or the sink and the follower).
func (r *root) spawnIngest() {
	var target *actor.PID
	if r.p.Mirror != nil {
		r.spawn(Store, r.p.Mirror.Props())
		return
	}
	if r.p.Store != nil {
		store := r.spawn(Store, r.p.Store.Props())
		target = r.spawn(Processor, r.p.Processor.PropsTo(store))
	} else {
		sink := r.p.cfg.Sink
		target = r.spawn(Sink, actor.PropsFromProducer(func() actor.Actor { return &sinkActor{sink: sink} }))
	}
	if r.p.Follower != nil {
		r.p.Follower.SendTo(target)
		r.spawn(Follower, r.p.Follower.Props())
	}
}

func (r *root) spawn(role Role, props *actor.Props) *actor.PID {
	if len(r.p.cfg.Middleware) > 0 {
		props = props.Configure(actor.WithReceiverMiddleware(r.p.cfg.Middleware...))
	}
	pid := r.ctx.Spawn(props)
	r.alive[pid.Id] = role
	r.p.mu.Lock()
	r.p.children[role] = pid
	r.p.mu.Unlock()
	return pid
}

// HandleFailure applies the supervision rule to a child that failed.
func (r *root) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	role, ok := r.alive[child.Id]
	if !ok || r.stopping {
		sup.StopChildren(child)
		return
	}
	err := asError(reason)
	if permanent(err) {
		r.log().Error("a pipeline actor failed for good: stopping the pipeline", zap.String("actor", string(role)), zap.Error(err))
		sup.StopChildren(child)
		r.stop(err) // the reason as the actor gave it: the process exits with it
		return
	}
	now := time.Now()
	recent := r.failures[role][:0]
	for _, t := range r.failures[role] {
		if now.Sub(t) < r.p.cfg.RestartWindow {
			recent = append(recent, t)
		}
	}
	r.failures[role] = append(recent, now)
	if n := len(r.failures[role]); n > r.p.cfg.MaxRestarts {
		r.log().Error("a pipeline actor keeps failing: stopping the pipeline", zap.String("actor", string(role)),
			zap.Int("failures", n), zap.Duration("within", r.p.cfg.RestartWindow), zap.Error(err))
		sup.StopChildren(child)
		r.stop(fmt.Errorf("the %s failed %d times within %s: %w", role, n, r.p.cfg.RestartWindow, err))
		return
	}
	r.log().Error("a pipeline actor failed: restarting it from what is committed", zap.String("actor", string(role)), zap.Error(err))
	group := r.groupOf(role)
	if (group[0] == Follower || group[0] == Store) && r.p.Store != nil {
		// Before the store's writer stops: its subscriptions wait for the
		// next one instead of ending.
		r.p.Store.ExpectRestart()
	}
	sup.StopChildren(child) // its mailbox is suspended: it takes nothing more
	r.restart(group, child)
}

// child stops or starts the projection or the streaming server.
func (r *root) child(m *childRequest) {
	switch {
	case r.stopping:
		m.done <- errors.New("pipeline: stopping")
		return
	case m.role == Projection && r.p.Projection == nil, m.role == Streamer && r.p.cfg.Streaming == nil,
		m.role != Projection && m.role != Streamer:
		m.done <- fmt.Errorf("pipeline: cannot start or stop the %s alone", m.role)
		return
	}
	r.p.mu.Lock()
	pid := r.p.children[m.role]
	r.p.mu.Unlock()
	switch {
	case m.start && pid != nil, !m.start && pid == nil:
		m.done <- nil
	case m.start:
		r.respawn(m.role)
		m.done <- nil
	default:
		r.enqueue(plan{steps: []step{{pid: pid, poison: true}}, then: func() { m.done <- nil }})
	}
}

// respawn spawns a fresh child of a role, and the ingest chain for its
// members.
func (r *root) respawn(role Role) {
	switch role {
	case Follower, Processor, Store, Sink:
		r.spawnIngest()
	case Projection:
		r.spawn(Projection, r.p.Projection.Props())
	case Streamer:
		r.spawn(Streamer, r.p.streamingProps())
	}
}

// groupOf returns the children a failure of role restarts.
func (r *root) groupOf(role Role) []Role {
	for _, g := range r.ingest() {
		if g == role {
			return r.ingest()
		}
	}
	return []Role{role}
}

// restart stops the failed child's group in order and spawns it afresh.
func (r *root) restart(group []Role, failed *actor.PID) {
	if r.restarting[group[0]] {
		return // planned already: the failed child is one it stops
	}
	if r.restarting == nil {
		r.restarting = map[Role]bool{}
	}
	r.restarting[group[0]] = true
	var steps []step
	for _, g := range group {
		if pid := r.childOf(g, failed); pid != nil {
			steps = append(steps, step{pid: pid, poison: !pid.Equal(failed)})
		}
	}
	r.enqueue(plan{steps: steps, then: func() {
		delete(r.restarting, group[0])
		r.p.mu.Lock()
		for _, g := range group {
			r.p.restarts[g]++
		}
		r.p.mu.Unlock()
		r.respawn(group[0])
	}})
}

// childOf returns the running child of a role; failed when it is the
// failed one (it may not be the registered child any more).
func (r *root) childOf(role Role, failed *actor.PID) *actor.PID {
	if r.alive[failed.Id] == role {
		return failed
	}
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.p.children[role]
}

// stop stops every child in order, then the root; err (nil for a Stop)
// is the pipeline's reason.
func (r *root) stop(err error) {
	if r.stopping {
		return
	}
	r.stopping = true
	r.p.err = err
	order := []Role{Streamer}
	order = append(order, Projection)
	order = append(order, r.ingest()...)
	var steps []step
	for _, role := range order {
		if role == Projection {
			steps = append(steps, step{}) // the servers
		}
		r.p.mu.Lock()
		pid := r.p.children[role]
		r.p.mu.Unlock()
		if pid != nil {
			steps = append(steps, step{pid: pid, poison: true})
		}
	}
	// A stop replaces whatever was planned.
	r.queued = nil
	r.plan, r.then = steps, func() { r.ctx.Stop(r.ctx.Self()) }
	if r.waiting == nil {
		r.advance()
	}
}

func (r *root) enqueue(p plan) {
	if r.stopping {
		return
	}
	if r.waiting != nil || len(r.plan) > 0 || r.then != nil {
		r.queued = append(r.queued, p)
		return
	}
	r.plan, r.then = p.steps, p.then
	r.advance()
}

// advance takes the plan's next step, or ends it.
func (r *root) advance() {
	for len(r.plan) > 0 {
		st := r.plan[0]
		r.plan = r.plan[1:]
		if st.pid == nil {
			r.shutdownServers()
			continue
		}
		if _, ok := r.alive[st.pid.Id]; !ok {
			continue // already gone
		}
		r.waiting = st.pid
		switch {
		case st.poison && r.alive[st.pid.Id] == Streamer:
			// The streaming server stops in order: its round trips in
			// flight end first, then its connections close.
			r.ctx.Send(st.pid, &streaming.Stop{Deadline: time.Now().Add(5 * time.Second)})
		case st.poison:
			r.ctx.Poison(st.pid)
		default:
			r.ctx.Stop(st.pid)
		}
		return
	}
	then := r.then
	r.then = nil
	if then != nil {
		then()
	}
	if len(r.queued) > 0 && r.then == nil && !r.stopping {
		next := r.queued[0]
		r.queued = r.queued[1:]
		r.plan, r.then = next.steps, next.then
		r.advance()
	}
}

// shutdownServers stops Config.Servers (the query API), in order.
func (r *root) shutdownServers() {
	for _, s := range r.p.cfg.Servers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.Shutdown(ctx)
		cancel()
	}
}

func (r *root) log() *zap.Logger { return r.p.log }

// permanent is the supervision rule's decider: whether a child's failure
// is one that no restart can mend. Each stage fails with its own sentinel
// errors, and only these stop the pipeline at once: another process
// writes the store (history.ErrAnotherWriter), this one lost the writer
// lock (history.ErrFenced: the store's commit or the projection's), a
// reader's database is not the one it followed (history.ErrHeadWentBack),
// the follow command's sink refused an event (errSinkRefused).
func permanent(err error) bool {
	for _, e := range []error{history.ErrAnotherWriter, history.ErrFenced, history.ErrHeadWentBack, errSinkRefused} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func asError(reason any) error {
	switch v := reason.(type) {
	case error:
		return v
	default:
		return fmt.Errorf("%v", v)
	}
}
