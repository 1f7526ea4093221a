package marlowe

import (
	"encoding/json"
	"fmt"
	"math/big"
	"math/bits"
	"reflect"
	"sort"
	"strings"
	"unsafe"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The sum types of the language (Contract, Action, Value, Observation, an
// input's content) and the semantics' warnings are read and written by the
// code of this file, from one description of each constructor (sums.go):
// its Plutus Data index and its fields in Plutus Data order, each with its
// core JSON key and the kind of value it holds. A constructor's shape is
// thus written once, for both forms and both directions.
//
// The description is read once, at init: describe turns each
// constructor's fields into their offsets in the node and their kinds, so
// that the codecs reach a field by its address and read or write it with a
// direct call of its kind's reader or writer (the switches of fieldSpec),
// without building the node's fields or calling through a function value
// per field.

// A slot is one field of a node, as the description gives it: its core
// JSON key (also its segment in an error path), its address in the node,
// its kind and its Go type (checked against the kind's).
type slot struct {
	key  string
	p    unsafe.Pointer
	kind fieldKind
	typ  reflect.Type
}

// kind is the fieldKind of the fields of type T.
type kind[T any] struct{ fieldKind }

// slotOf is the slot of the field *p of kind k under key.
func slotOf[T any](key string, p *T, k kind[T]) slot {
	return slot{key, unsafe.Pointer(p), k.fieldKind, reflect.TypeFor[T]()}
}

// slots holds the fields of one node, at most five, followed by empty
// slots.
type slots [5]slot

func (fs *slots) list() []slot {
	n := 0
	for n < len(fs) && fs[n].p != nil {
		n++
	}
	return fs[:n]
}

// A fieldKind is the kind of value a field holds: its tag says which
// reader and writer the codecs call, what names an integer field in a
// Plutus Data shape error.
type fieldKind struct {
	tag  kindTag
	what string
}

type kindTag uint8

const (
	kParty kindTag = iota
	kPayee
	kToken
	kChoiceID
	kValueID
	kValue
	kObservation
	kContract
	kAction
	kCases
	kBounds
	kInt
)

// kindTypes is the Go type of the fields of each tag.
var kindTypes = [...]reflect.Type{
	kParty: reflect.TypeFor[Party](), kPayee: reflect.TypeFor[Payee](), kToken: reflect.TypeFor[Token](),
	kChoiceID: reflect.TypeFor[ChoiceID](), kValueID: reflect.TypeFor[ValueID](), kValue: reflect.TypeFor[Value](),
	kObservation: reflect.TypeFor[Observation](), kContract: reflect.TypeFor[Contract](), kAction: reflect.TypeFor[Action](),
	kCases: reflect.TypeFor[[]Case](), kBounds: reflect.TypeFor[[]Bound](), kInt: reflect.TypeFor[*big.Int](),
}

// The kinds of the language's fields.
var (
	partyField       = kind[Party]{fieldKind{tag: kParty}}
	payeeField       = kind[Payee]{fieldKind{tag: kPayee}}
	tokenField       = kind[Token]{fieldKind{tag: kToken}}
	choiceIDField    = kind[ChoiceID]{fieldKind{tag: kChoiceID}}
	valueIDField     = kind[ValueID]{fieldKind{tag: kValueID}}
	valueField       = kind[Value]{fieldKind{tag: kValue}}
	observationField = kind[Observation]{fieldKind{tag: kObservation}}
	contractField    = kind[Contract]{fieldKind{tag: kContract}}
	actionField      = kind[Action]{fieldKind{tag: kAction}}
	casesField       = kind[[]Case]{fieldKind{tag: kCases}}
	boundsField      = kind[[]Bound]{fieldKind{tag: kBounds}}
)

// intField is the kind of integer fields; what names one in a Plutus Data
// shape error.
func intField(what string) kind[*big.Int] { return kind[*big.Int]{fieldKind{kInt, what}} }

// A fieldSpec is one field of a constructor: its key, its kind and its
// offset in the node.
type fieldSpec struct {
	key string
	fieldKind
	off uintptr
}

// wrap puts err under the field's key; the one field of a bare constructor
// (a Constant) has no key of its own.
func (f *fieldSpec) wrap(err error) error {
	if f.key == "" {
		return err
	}
	return at(f.key, err)
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
	arity   []int
	types   []unsafe.Pointer  // the dynamic type of each constructor's nodes
	byCount [6]uint64         // the constructors read from a JSON object, by number of keys
	byKey   map[string]uint64 // the constructors with each JSON key
	bySig   map[string]int    // the constructor of each JSON key signature ("a,b,c")
	atoms   map[any]int       // the JSON of each constructor without fields
	bare    int               // the constructor written as its one field alone (a Constant), or -1
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
	fields   []fieldSpec // in Plutus Data order
	order    []int       // the fields in JSON key order
	keys     []string    // `{"key":`, then `,"key":`, in JSON key order
	read     []int       // the order in which the JSON reader reads the fields
	atomJSON string
}

// iface is the layout of an interface value: a word naming its dynamic
// type, then the data word, which for a pointer (every node) is the
// pointer. describe checks both against reflect.
type iface struct{ typ, data unsafe.Pointer }

func words(x any) iface { return *(*iface)(unsafe.Pointer(&x)) }

// describe completes s from its constructors and checks that slots gives
// each constructor its own index and fields of the kinds' types.
func (s *sumType[T]) describe() *sumType[T] {
	if s.jsonName == "" {
		s.jsonName = s.name
	}
	if len(s.ctors) > 64 {
		panic("marlowe: " + s.name + " has more constructors than a set of them holds")
	}
	s.arity = make([]int, len(s.ctors))
	s.types = make([]unsafe.Pointer, len(s.ctors))
	s.byKey = map[string]uint64{}
	s.bySig = map[string]int{}
	s.atoms = map[any]int{}
	s.bare = -1
	for i := range s.ctors {
		c := &s.ctors[i]
		node := c.new()
		index, fs := s.slots(node)
		if index != i {
			panic(fmt.Sprintf("marlowe: %s constructor %d describes itself as %d", s.name, i, index))
		}
		w := words(node)
		if v := reflect.ValueOf(node); v.Kind() != reflect.Pointer || v.UnsafePointer() != w.data {
			panic(fmt.Sprintf("marlowe: %s constructor %d: a node is not a pointer in an interface", s.name, i))
		}
		s.types[i] = w.typ
		size := reflect.TypeOf(node).Elem().Size()
		for _, sl := range fs.list() {
			off := uintptr(sl.p) - uintptr(w.data)
			if sl.typ != kindTypes[sl.kind.tag] || off >= size {
				panic(fmt.Sprintf("marlowe: %s constructor %d: field %q is no field of its kind", s.name, i, sl.key))
			}
			c.fields = append(c.fields, fieldSpec{sl.key, sl.kind, off})
		}
		s.arity[i] = len(c.fields)
		s.enter(i, c)
	}
	for i := range s.types {
		for j := range i {
			if s.types[i] == s.types[j] {
				panic(fmt.Sprintf("marlowe: %s constructors %d and %d have one type", s.name, j, i))
			}
		}
	}
	return s
}

// enter sets the JSON orders and keys of constructor i and enters it in
// the tables of the JSON reader.
func (s *sumType[T]) enter(i int, c *ctor[T]) {
	fs := c.fields
	c.order = make([]int, len(fs))
	for j := range c.order {
		c.order[j] = j
	}
	sort.Slice(c.order, func(a, b int) bool { return fs[c.order[a]].key < fs[c.order[b]].key })
	for j, k := range c.order {
		open := ","
		if j == 0 {
			open = "{"
		}
		c.keys = append(c.keys, open+`"`+fs[k].key+`":`)
	}
	c.read = c.order
	if !c.sortedRead {
		c.read = make([]int, len(fs))
		for j := range c.read {
			c.read[j] = j
		}
	}
	switch {
	case c.atom != nil:
		s.atoms[c.atom] = i
		text, _ := json.Marshal(c.atom)
		c.atomJSON = string(text)
	case len(fs) == 1 && fs[0].key == "":
		s.bare = i
	default:
		s.byCount[len(fs)] |= 1 << i
		keys := make([]string, len(fs))
		for j, k := range c.order {
			s.byKey[fs[k].key] |= 1 << i
			keys[j] = fs[k].key
		}
		s.bySig[strings.Join(keys, ",")] = i
	}
}

// node returns the constructor index of x and its address, or -1 for a
// node of another type.
func (s *sumType[T]) node(x T) (int, unsafe.Pointer) {
	w := words(x)
	for i, t := range s.types {
		if t == w.typ {
			return i, w.data
		}
	}
	return -1, nil
}

// fieldsOf returns the fields of x's constructor and x's address; none
// for a node of another type.
func (s *sumType[T]) fieldsOf(x T) ([]fieldSpec, unsafe.Pointer) {
	i, p := s.node(x)
	if i < 0 {
		return nil, nil
	}
	return s.ctors[i].fields, p
}

// fromData reads a node from its Plutus Data.
func (s *sumType[T]) fromData(d pd.Data) (T, error) {
	var zero T
	c, err := constr(d, s.name, s.arity)
	if err != nil {
		return zero, err
	}
	ct := &s.ctors[c.Index]
	node := ct.new()
	if len(ct.fields) > 0 {
		p := words(node).data
		for i := range ct.fields {
			f := &ct.fields[i]
			if err := f.fromData(unsafe.Add(p, f.off), c.Fields[i]); err != nil {
				return zero, f.wrap(err)
			}
		}
	}
	return node, nil
}

// toData returns the Plutus Data of a node.
func (s *sumType[T]) toData(x T) pd.Data {
	i, p := s.node(x)
	if i < 0 {
		panic(fmt.Sprintf("marlowe: %sToData of %T", s.name, x))
	}
	fs := s.ctors[i].fields
	fields := make([]pd.Data, len(fs))
	for j := range fs {
		fields[j] = fs[j].toData(unsafe.Add(p, fs[j].off))
	}
	return pd.NewConstr(uint64(i), fields...)
}

// fromJSON reads a node from its core JSON: an object with exactly the keys
// of one constructor, the atom of a constructor without fields, or the one
// field of the bare constructor.
func (s *sumType[T]) fromJSON(v any) (T, error) {
	var zero T
	switch x := v.(type) {
	case map[string]any:
		return s.fromObject(x)
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
			f := &s.ctors[s.bare].fields[0]
			if err := f.fromJSON(unsafe.Add(words(node).data, f.off), x); err != nil {
				return zero, err
			}
			return node, nil
		}
	}
	_, _, err := object(v, s.jsonName)
	return zero, err
}

// fromObject reads a node from a JSON object: the constructor with exactly
// its keys, that is with as many keys and each of the object's; or, as the
// signatures are compared when that fails, the constructor whose signature
// is the object's (a key with commas in it).
func (s *sumType[T]) fromObject(m map[string]any) (T, error) {
	var zero T
	var set uint64
	if len(m) < len(s.byCount) {
		set = s.byCount[len(m)]
	}
	for k := range m {
		if set &= s.byKey[k]; set == 0 {
			break
		}
	}
	i := bits.TrailingZeros64(set)
	if set == 0 {
		_, sig, _ := object(m, s.jsonName)
		var ok bool
		if i, ok = s.bySig[sig]; !ok {
			return zero, unknownKeys(s.jsonName, sig)
		}
	}
	c := &s.ctors[i]
	node := c.new()
	p := words(node).data
	for _, k := range c.read {
		f := &c.fields[k]
		if err := f.fromJSON(unsafe.Add(p, f.off), m[f.key]); err != nil {
			return zero, f.wrap(err)
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
	i, p := s.node(x)
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
		c.fields[0].toJSON(w, unsafe.Add(p, c.fields[0].off))
		return -1
	}
	for j, k := range c.order {
		w.raw(c.keys[j])
		f := &c.fields[k]
		f.toJSON(w, unsafe.Add(p, f.off))
	}
	return len(c.order)
}
