// Marlowe notation: a contract's core JSON written as the Marlowe
// language writes it (the Haskell constructors of Language.Marlowe.Core,
// as the Playground shows them): When [Case (Deposit ...) ...] 1700000000000 Close.
// Terms that fit on a line stay on it; others put each argument on a line
// of its own, four spaces in. No DOM: the unit tests read it as it is.

import { stringify } from "./json.js";

const is = (o) => o !== null && typeof o === "object" && !Array.isArray(o);
const has = (o, ...keys) => is(o) && keys.every((k) => k in o);

// A term: a string (an atom), {name, args} (a constructor and its
// arguments) or {list} (a list of terms).
const T = (name, ...args) => ({ name, args });
const str = (s) => JSON.stringify(String(s));
const unreadable = (v) => "‹unreadable: " + stringify(v) + "›";

function party(p) {
  if (has(p, "role_token")) return T("Role", str(p.role_token));
  if (has(p, "address")) return T("Address", str(p.address));
  return unreadable(p);
}

function token(t) {
  if (has(t, "currency_symbol", "token_name")) return T("Token", str(t.currency_symbol), str(t.token_name));
  return unreadable(t);
}

function choiceId(c) {
  if (has(c, "choice_name", "choice_owner")) return T("ChoiceId", str(c.choice_name), party(c.choice_owner));
  return unreadable(c);
}

function payee(p) {
  if (has(p, "account")) return T("Account", party(p.account));
  if (has(p, "party")) return T("Party", party(p.party));
  return unreadable(p);
}

function value(v) {
  if (typeof v === "number" || typeof v === "bigint") return T("Constant", String(v));
  if (v === "time_interval_start") return "TimeIntervalStart";
  if (v === "time_interval_end") return "TimeIntervalEnd";
  if (has(v, "amount_of_token", "in_account")) return T("AvailableMoney", party(v.in_account), token(v.amount_of_token));
  if (has(v, "negate")) return T("NegValue", value(v.negate));
  if (has(v, "add", "and")) return T("AddValue", value(v.add), value(v.and));
  if (has(v, "value", "minus")) return T("SubValue", value(v.value), value(v.minus));
  if (has(v, "multiply", "times")) return T("MulValue", value(v.multiply), value(v.times));
  if (has(v, "divide", "by")) return T("DivValue", value(v.divide), value(v.by));
  if (has(v, "value_of_choice")) return T("ChoiceValue", choiceId(v.value_of_choice));
  if (has(v, "use_value")) return T("UseValue", str(v.use_value));
  if (has(v, "if", "then", "else")) return T("Cond", observation(v.if), value(v.then), value(v.else));
  return unreadable(v);
}

function observation(o) {
  if (o === true) return "TrueObs";
  if (o === false) return "FalseObs";
  if (has(o, "both", "and")) return T("AndObs", observation(o.both), observation(o.and));
  if (has(o, "either", "or")) return T("OrObs", observation(o.either), observation(o.or));
  if (has(o, "not")) return T("NotObs", observation(o.not));
  if (has(o, "chose_something_for")) return T("ChoseSomething", choiceId(o.chose_something_for));
  for (const [k, name] of [["ge_than", "ValueGE"], ["gt", "ValueGT"], ["lt", "ValueLT"], ["le_than", "ValueLE"], ["equal_to", "ValueEQ"]]) {
    if (has(o, "value", k)) return T(name, value(o.value), value(o[k]));
  }
  return unreadable(o);
}

function action(a) {
  if (has(a, "party", "deposits", "of_token", "into_account")) return T("Deposit", party(a.into_account), party(a.party), token(a.of_token), value(a.deposits));
  if (has(a, "for_choice", "choose_between")) {
    return T("Choice", choiceId(a.for_choice), { list: (a.choose_between || []).map((b) => T("Bound", String(b.from), String(b.to))) });
  }
  if (has(a, "notify_if")) return T("Notify", observation(a.notify_if));
  return unreadable(a);
}

function contract(c) {
  if (c === "close") return "Close";
  if (has(c, "pay", "from_account", "to", "token", "then")) return T("Pay", party(c.from_account), payee(c.to), token(c.token), value(c.pay), contract(c.then));
  if (has(c, "if", "then", "else")) return T("If", observation(c.if), contract(c.then), contract(c.else));
  if (has(c, "when", "timeout", "timeout_continuation")) {
    const cases = (c.when || []).map((k) => ("merkleized_then" in k ? T("MerkleizedCase", action(k.case), str(k.merkleized_then)) : T("Case", action(k.case), contract(k.then))));
    return T("When", { list: cases }, String(c.timeout), contract(c.timeout_continuation));
  }
  if (has(c, "let", "be", "then")) return T("Let", str(c.let), value(c.be), contract(c.then));
  if (has(c, "assert", "then")) return T("Assert", observation(c.assert), contract(c.then));
  return unreadable(c);
}

// flat writes a term on one line; nested is true where a constructor
// with arguments needs parentheses (an argument).
function flat(t, nested) {
  if (typeof t === "string") return t;
  if (t.list) return "[" + t.list.map((x) => flat(x, false)).join(", ") + "]";
  if (t.args.length === 0) return t.name;
  const s = t.name + " " + t.args.map((a) => flat(a, true)).join(" ");
  return nested ? "(" + s + ")" : s;
}

function pretty(t, indent, nested, width) {
  const one = flat(t, nested);
  if (typeof t === "string" || indent.length + one.length <= width) return one;
  const inner = indent + "    ";
  if (t.list) {
    if (t.list.length === 0) return "[]";
    return "[ " + t.list.map((x, i) => (i ? indent + ", " : "") + pretty(x, indent + "  ", false, width)).join("\n") + "\n" + indent + "]";
  }
  const args = t.args.map((a) => inner + pretty(a, inner, true, width));
  return nested ? "(" + t.name + "\n" + args.join("\n") + "\n" + indent + ")" : t.name + "\n" + args.join("\n");
}

/** notation writes a contract (core JSON) in Marlowe notation, lines at most width wide where terms allow. */
export function notation(c, { width = 80 } = {}) {
  return pretty(contract(c), "", false, width);
}

/** notationFlat writes a contract on one line. */
export function notationFlat(c) {
  return flat(contract(c), false);
}
