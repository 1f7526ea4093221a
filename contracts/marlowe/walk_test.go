package marlowe

import (
	"math/big"
	"testing"
)

// TestValueOperands checks every value and observation constructor: the
// binary ones give their operands in order, the others none.
func TestValueOperands(t *testing.T) {
	l, r := &Constant{N: big.NewInt(1)}, &Constant{N: big.NewInt(2)}
	binary := []any{
		&AddValue{Left: l, Right: r}, &SubValue{Left: l, Right: r}, &MulValue{Left: l, Right: r},
		&DivValue{Left: l, Right: r}, &ValueGE{Left: l, Right: r}, &ValueGT{Left: l, Right: r},
		&ValueLT{Left: l, Right: r}, &ValueLE{Left: l, Right: r}, &ValueEQ{Left: l, Right: r},
	}
	for _, node := range binary {
		gl, gr, ok := ValueOperands(node)
		if !ok || gl != Value(l) || gr != Value(r) {
			t.Errorf("%T: got %v %v %v", node, gl, gr, ok)
		}
	}
	others := []any{
		&AvailableMoney{}, l, &NegValue{Value: l}, &ChoiceValue{}, timeStart, timeEnd, &UseValue{},
		&Cond{Observation: trueObservation, Then: l, Else: r}, &AndObs{Left: trueObservation, Right: falseObservation},
		&OrObs{Left: trueObservation, Right: falseObservation}, &NotObs{Observation: trueObservation},
		&ChoseSomething{}, trueObservation, falseObservation, closeContract, &Deposit{}, nil, 3,
	}
	for _, node := range others {
		if _, _, ok := ValueOperands(node); ok {
			t.Errorf("%T: operands of a node that has none", node)
		}
	}
}
