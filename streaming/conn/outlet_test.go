package conn

import (
	"testing"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// TestOutletOffers: a stream's offer is queued only while its outlet is
// open, the queue is open, has room and holds no frames back (frames wait
// in the actor's overflow); a refused offer takes nothing from the budget.
func TestOutletOffers(t *testing.T) {
	q := newSendQueue(2, 1<<10)
	q.budget = &Budget{limit: 1 << 20}
	o := q.newOutlet()
	batch := func() *wire.FrameParts {
		return &wire.FrameParts{Head: []byte(`{"type":"batch","records":[`), Recs: [][]byte{[]byte(`{}`)}, Tail: []byte(`]}`)}
	}
	if o.Offer(batch()) {
		t.Fatal("a closed outlet took a batch (before the subscribed frame)")
	}
	if q.len() != 0 || q.budget.used.Load() != 0 {
		t.Fatalf("a refused offer left %d frames and %d budget bytes", q.len(), q.budget.used.Load())
	}
	o.setOpen(true)
	if !o.Offer(batch()) {
		t.Fatal("an open outlet refused a batch into an empty queue")
	}
	q.hold(true)
	if o.Offer(batch()) {
		t.Fatal("an offer jumped the frames waiting for room")
	}
	q.hold(false)
	if !o.Offer(batch()) {
		t.Fatal("an open outlet refused a batch with room left")
	}
	if o.Offer(batch()) {
		t.Fatal("a full queue took a batch")
	}
	f, _ := q.pop(nil)
	if f.parts == nil || f.size() != batch().Size() {
		t.Fatalf("the queued frame: %+v", f)
	}
	q.done(f)
	o.setOpen(false)
	if o.Offer(batch()) {
		t.Fatal("a closed outlet took a batch (after the subscription's last frame)")
	}
	o.setOpen(true)
	q.close()
	if o.Offer(batch()) {
		t.Fatal("a closed queue took a batch")
	}
	if n := q.budget.used.Load(); n != 0 {
		t.Fatalf("%d budget bytes left after the queue closed", n)
	}
}
