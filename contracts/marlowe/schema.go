package marlowe

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The sum types of the language (Contract, Action, Value, Observation, an
// input's content) and the semantics' warnings are read and written by the
// code of this file, from one description of each constructor (sums.go):
// its Plutus Data index and its fields in Plutus Data order, each with its
// core JSON key and the kind of value it holds. A constructor's shape is
// thus written once, for both forms and both directions.

// A slot is one field of a node: its core JSON key (also its segment in an
// error path), a pointer to it in the node, and its kind.
type slot struct {
	key  string
	p    any // a *T for a kind of T
	kind fieldKind
}

// slotOf is the slot of the field *p of kind k under key.
func slotOf[T any](key string, p *T, k *kind[T]) slot { return slot{key, p, k} }

// wrap puts err under the slot's key; the one field of a bare constructor
// (a Constant) has no key of its own.
func (s *slot) wrap(err error) error {
	if s.key == "" {
		return err
	}
	return at(s.key, err)
}

// slots holds the fields of one node, at most five, followed by empty
// slots: held in place, so that reading and writing a node does not
// allocate for them.
type slots [5]slot

// len returns the number of fields.
func (fs *slots) len() int {
	n := 0
	for n < len(fs) && fs[n].kind != nil {
		n++
	}
	return n
}

func (fs *slots) list() []slot { return fs[:fs.len()] }

// fieldKind reads and writes a field of one Go type, given a pointer to it.
type fieldKind interface {
	fromData(p any, d pd.Data) error
	toData(p any) pd.Data
	fromJSON(p, v any) error
	toJSON(w *jsonWriter, p any)
}

// kind is the fieldKind of the fields of type T.
type kind[T any] struct {
	readData  func(pd.Data) (T, error)
	data      func(T) pd.Data
	readJSON  func(any) (T, error)
	writeJSON func(*jsonWriter, T)
}

func (k *kind[T]) fromData(p any, d pd.Data) (err error) {
	*p.(*T), err = k.readData(d)
	return err
}

func (k *kind[T]) toData(p any) pd.Data { return k.data(*p.(*T)) }

func (k *kind[T]) fromJSON(p, v any) (err error) {
	*p.(*T), err = k.readJSON(v)
	return err
}

func (k *kind[T]) toJSON(w *jsonWriter, p any) { k.writeJSON(w, *p.(*T)) }

// The kinds of the language's fields.
var (
	partyField       = &kind[Party]{PartyFromData, Party.ToData, partyFromJSON, (*jsonWriter).party}
	payeeField       = &kind[Payee]{payeeFromData, Payee.ToData, payeeFromJSON, (*jsonWriter).payee}
	tokenField       = &kind[Token]{TokenFromData, Token.ToData, tokenFromJSON, (*jsonWriter).token}
	choiceIDField    = &kind[ChoiceID]{ChoiceIDFromData, ChoiceID.ToData, choiceIDFromJSON, (*jsonWriter).choiceID}
	valueIDField     = &kind[ValueID]{valueIDFromData, ValueID.ToData, valueIDFromJSON, (*jsonWriter).valueID}
	valueField       = &kind[Value]{ValueFromData, ValueToData, valueFromJSON, (*jsonWriter).value}
	observationField = &kind[Observation]{ObservationFromData, ObservationToData, observationFromJSON, (*jsonWriter).observation}
	contractField    = &kind[Contract]{ContractFromData, ContractToData, contractFromJSON, (*jsonWriter).contract}
	actionField      = &kind[Action]{ActionFromData, ActionToData, actionFromJSON, (*jsonWriter).action}
	casesField       = &kind[[]Case]{casesFromData, casesToData, casesFromJSON, (*jsonWriter).cases}
	boundsField      = &kind[[]Bound]{boundsFromData, boundsToData, boundsFromJSON, (*jsonWriter).bounds}
)

// intField is the kind of integer fields; what names one in a Plutus Data
// shape error.
func intField(what string) *kind[*big.Int] {
	return &kind[*big.Int]{func(d pd.Data) (*big.Int, error) { return intOf(d, what) }, n, jsonInt, (*jsonWriter).int}
}

// A sumType describes a sum type T by its constructors.
type sumType[T any] struct {
	name     string // in errors about its Plutus Data: "Contract"
	jsonName string // in errors about its JSON, when it is not name
	unknown  string // in the error of a JSON string that is no constructor: "contract"
	jsonWhat string // in the error of writing a node of another type: "contract node"
	// slots returns the constructor index of a node and its fields, in
	// Plutus Data order; the index is -1 for a node of another type.
	slots func(T) (int, slots)
	ctors []ctor[T]

	// set by describe
	arity []int
	bySig map[string]int // the JSON key signature ("a,b,c") of each constructor with fields
	atoms map[any]int    // the JSON of each constructor without fields
	bare  int            // the constructor written as its one field alone (a Constant), or -1
}

// A ctor is one constructor of a sum type.
type ctor[T any] struct {
	new func() T
	// atom is the JSON of a constructor without fields: a string or a bool.
	atom any
	// sortedRead: the JSON reader reads the keys in alphabetical order, not
	// in field order, which decides the error of an object with more than
	// one bad field.
	sortedRead bool

	// set by describe
	order    []int    // the fields in JSON key order
	keys     []string // `{"key":`, then `,"key":`, in JSON key order
	read     []int    // the order in which the JSON reader reads the fields
	atomJSON string
}

// describe completes s from its constructors and checks that slots gives
// each constructor its own index.
func (s *sumType[T]) describe() *sumType[T] {
	if s.jsonName == "" {
		s.jsonName = s.name
	}
	s.arity = make([]int, len(s.ctors))
	s.bySig = map[string]int{}
	s.atoms = map[any]int{}
	s.bare = -1
	for i := range s.ctors {
		c := &s.ctors[i]
		index, fs := s.slots(c.new())
		if index != i {
			panic(fmt.Sprintf("marlowe: %s constructor %d describes itself as %d", s.name, i, index))
		}
		list := fs.list()
		s.arity[i] = len(list)
		c.order = make([]int, len(list))
		for j := range c.order {
			c.order[j] = j
		}
		sort.Slice(c.order, func(a, b int) bool { return list[c.order[a]].key < list[c.order[b]].key })
		names := make([]string, len(list))
		for j, k := range c.order {
			names[j] = list[k].key
			open := ","
			if j == 0 {
				open = "{"
			}
			c.keys = append(c.keys, open+`"`+list[k].key+`":`)
		}
		c.read = c.order
		if !c.sortedRead {
			c.read = make([]int, len(list))
			for j := range c.read {
				c.read[j] = j
			}
		}
		switch {
		case c.atom != nil:
			s.atoms[c.atom] = i
			text, _ := json.Marshal(c.atom)
			c.atomJSON = string(text)
		case len(list) == 1 && list[0].key == "":
			s.bare = i
		default:
			s.bySig[strings.Join(names, ",")] = i
		}
	}
	return s
}

// fromData reads a node from its Plutus Data.
func (s *sumType[T]) fromData(d pd.Data) (T, error) {
	var zero T
	c, err := constr(d, s.name, s.arity)
	if err != nil {
		return zero, err
	}
	node := s.ctors[c.Index].new()
	_, fs := s.slots(node)
	for i := range fs.len() {
		sl := &fs[i]
		if err := sl.kind.fromData(sl.p, c.Fields[i]); err != nil {
			return zero, sl.wrap(err)
		}
	}
	return node, nil
}

// toData returns the Plutus Data of a node.
func (s *sumType[T]) toData(x T) pd.Data {
	i, fs := s.slots(x)
	if i < 0 {
		panic(fmt.Sprintf("marlowe: %sToData of %T", s.name, x))
	}
	fields := make([]pd.Data, fs.len())
	for j := range fields {
		sl := &fs[j]
		fields[j] = sl.kind.toData(sl.p)
	}
	return pd.NewConstr(uint64(i), fields...)
}

// fromJSON reads a node from its core JSON: an object with exactly the keys
// of one constructor, the atom of a constructor without fields, or the one
// field of the bare constructor.
func (s *sumType[T]) fromJSON(v any) (T, error) {
	var zero T
	switch x := v.(type) {
	case string, bool:
		if i, ok := s.atoms[x]; ok {
			return s.ctors[i].new(), nil
		}
		if str, ok := x.(string); ok && s.unknown != "" {
			return zero, shapeError("%s: unknown %s %q", s.jsonName, s.unknown, str)
		}
	case json.Number:
		if s.bare >= 0 {
			node := s.ctors[s.bare].new()
			_, fs := s.slots(node)
			if err := fs[0].kind.fromJSON(fs[0].p, x); err != nil {
				return zero, err
			}
			return node, nil
		}
	}
	m, sig, err := object(v, s.jsonName)
	if err != nil {
		return zero, err
	}
	return s.fromObject(m, sig)
}

// fromObject reads a node from a JSON object with the key signature sig.
func (s *sumType[T]) fromObject(m map[string]any, sig string) (T, error) {
	var zero T
	i, ok := s.bySig[sig]
	if !ok {
		return zero, unknownKeys(s.jsonName, sig)
	}
	c := &s.ctors[i]
	node := c.new()
	_, fs := s.slots(node)
	for _, k := range c.read {
		sl := &fs[k]
		if err := sl.kind.fromJSON(sl.p, m[sl.key]); err != nil {
			return zero, sl.wrap(err)
		}
	}
	return node, nil
}

// writeJSON writes the core JSON of a node.
func (s *sumType[T]) writeJSON(w *jsonWriter, x T) {
	if s.writeKeys(w, x) >= 0 {
		w.raw("}")
	}
}

// writeKeys writes the core JSON of a node, an object without its closing
// brace, and returns how many keys it wrote; or it writes the node whole
// (an atom, a bare value, or null after an error) and returns -1.
func (s *sumType[T]) writeKeys(w *jsonWriter, x T) int {
	i, fs := s.slots(x)
	if i < 0 {
		w.fail(fmt.Errorf("%s %T", s.jsonWhat, x))
		w.raw("null")
		return -1
	}
	c := &s.ctors[i]
	switch {
	case c.atomJSON != "":
		w.raw(c.atomJSON)
		return -1
	case i == s.bare:
		fs[0].kind.toJSON(w, fs[0].p)
		return -1
	}
	for j, k := range c.order {
		w.raw(c.keys[j])
		sl := &fs[k]
		sl.kind.toJSON(w, sl.p)
	}
	return len(c.order)
}
