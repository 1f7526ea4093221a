// Marlowe in words: values, observations, actions, inputs, payments and
// steps as sentences ("Alice deposits 100 ADA into Bob’s account"). Plain
// strings, no DOM: the unit tests check every construct.

import { amount, date, isAda, party, possessive, short, tokenName } from "./format.js";

/** UNKNOWN stands for a part of a contract or input this page cannot read. */
export const UNKNOWN = "‹unreadable›";

const is = (o) => o !== null && typeof o === "object" && !Array.isArray(o);
const has = (o, ...keys) => is(o) && keys.every((k) => k in o);

/** account: "Bob’s account". */
export function account(p, opts) {
  return possessive(party(p, opts)) + " account";
}

/** payee: a Pay's destination: "Bob" (paid out) or "Bob’s account". */
export function payee(p, opts) {
  if (has(p, "account")) return account(p.account, opts);
  if (has(p, "party")) return party(p.party, opts);
  return UNKNOWN;
}

/** choiceId: "“Price” by Oracle". */
export function choiceId(c, opts) {
  if (!has(c, "choice_name", "choice_owner")) return UNKNOWN;
  return `“${c.choice_name}” by ${party(c.choice_owner, opts)}`;
}

/** value writes a Marlowe value as an expression. */
export function value(v, opts) {
  if (typeof v === "number" || typeof v === "bigint") return numberText(v);
  if (v === "time_interval_start") return "the interval’s start";
  if (v === "time_interval_end") return "the interval’s end";
  if (!is(v)) return UNKNOWN;
  if (has(v, "amount_of_token", "in_account")) {
    return `${tokenName(v.amount_of_token)} in ${account(v.in_account, opts)}`;
  }
  if (has(v, "negate")) return "−" + wrap(v.negate, opts);
  if (has(v, "add", "and")) return `${wrap(v.add, opts)} + ${wrap(v.and, opts)}`;
  if (has(v, "value", "minus")) return `${wrap(v.value, opts)} − ${wrap(v.minus, opts)}`;
  if (has(v, "multiply", "times")) return `${wrap(v.multiply, opts)} × ${wrap(v.times, opts)}`;
  if (has(v, "divide", "by")) return `${wrap(v.divide, opts)} ÷ ${wrap(v.by, opts)}`;
  if (has(v, "value_of_choice")) return `the choice ${choiceId(v.value_of_choice, opts)}`;
  if (has(v, "use_value")) return `the value “${v.use_value}”`;
  if (has(v, "if", "then", "else")) {
    return `(if ${observation(v.if, opts)} then ${value(v.then, opts)} else ${value(v.else, opts)})`;
  }
  return UNKNOWN;
}

// wrap puts an operator's operand in parentheses unless it is atomic.
function wrap(v, opts) {
  const s = value(v, opts);
  const atomic = typeof v === "number" || typeof v === "bigint" || typeof v === "string" ||
    has(v, "use_value") || has(v, "value_of_choice") || has(v, "amount_of_token") || has(v, "if");
  return atomic ? s : `(${s})`;
}

function numberText(n) {
  return String(n);
}

/** quantity writes a value of a token: a constant as an amount ("100 ADA"), an account's whole balance, or an expression with its unit. */
export function quantity(v, token, opts) {
  if (typeof v === "number" || typeof v === "bigint") return amount(v, token);
  if (has(v, "amount_of_token", "in_account") && JSON.stringify(v.amount_of_token) === JSON.stringify(token)) {
    return `all the ${tokenName(token)} in ${account(v.in_account, opts)}`;
  }
  return `${value(v, opts)} (in ${isAda(token) ? "lovelace" : tokenName(token)})`;
}

/** observation writes a Marlowe observation as a condition. */
export function observation(o, opts) {
  if (o === true) return "true";
  if (o === false) return "false";
  if (!is(o)) return UNKNOWN;
  if (has(o, "both", "and")) return `${wrapObs(o.both, opts)} and ${wrapObs(o.and, opts)}`;
  if (has(o, "either", "or")) return `${wrapObs(o.either, opts)} or ${wrapObs(o.or, opts)}`;
  if (has(o, "not")) return `not ${wrapObs(o.not, opts)}`;
  if (has(o, "chose_something_for")) return `${choiceId(o.chose_something_for, opts)} has been made`;
  if (has(o, "value", "ge_than")) return `${value(o.value, opts)} ≥ ${value(o.ge_than, opts)}`;
  if (has(o, "value", "gt")) return `${value(o.value, opts)} > ${value(o.gt, opts)}`;
  if (has(o, "value", "lt")) return `${value(o.value, opts)} < ${value(o.lt, opts)}`;
  if (has(o, "value", "le_than")) return `${value(o.value, opts)} ≤ ${value(o.le_than, opts)}`;
  if (has(o, "value", "equal_to")) return `${value(o.value, opts)} = ${value(o.equal_to, opts)}`;
  return UNKNOWN;
}

function wrapObs(o, opts) {
  const s = observation(o, opts);
  return has(o, "both") || has(o, "either") ? `(${s})` : s;
}

/** bounds: "between 1 and 5", "1, 3 or between 7 and 9". */
export function bounds(list) {
  const parts = (list || []).map((b) => (String(b.from) === String(b.to) ? String(b.from) : `between ${b.from} and ${b.to}`));
  if (parts.length === 0) return "nothing";
  if (parts.length === 1) return parts[0];
  return parts.slice(0, -1).join(", ") + " or " + parts[parts.length - 1];
}

/** action writes a When case's action: what has to happen for the case. */
export function action(a, opts) {
  if (has(a, "party", "deposits", "of_token", "into_account")) {
    return `${party(a.party, opts)} deposits ${quantity(a.deposits, a.of_token, opts)} into ${intoAccount(a.party, a.into_account, opts)}`;
  }
  if (has(a, "for_choice", "choose_between")) {
    return `${party(a.for_choice.choice_owner, opts)} chooses ${bounds(a.choose_between)} for “${a.for_choice.choice_name}”`;
  }
  if (has(a, "notify_if")) {
    return a.notify_if === true ? "someone notifies the contract" : `someone notifies the contract when ${observation(a.notify_if, opts)}`;
  }
  return UNKNOWN;
}

function intoAccount(from, into, opts) {
  return party(from, opts) === party(into, opts) && JSON.stringify(from) === JSON.stringify(into) ? "their own account" : account(into, opts);
}

/** input writes an input a step applied: "Alice deposits 100 ADA into Bob’s account". */
export function input(i, opts) {
  let s;
  if (i === "input_notify" || (has(i, "continuation_hash") && !has(i, "input_from_party") && !has(i, "for_choice_id"))) {
    s = "a notification: the contract is told to check its condition";
  } else if (has(i, "input_from_party", "that_deposits", "of_token", "into_account")) {
    s = `${party(i.input_from_party, opts)} deposits ${amount(i.that_deposits, i.of_token)} into ${intoAccount(i.input_from_party, i.into_account, opts)}`;
  } else if (has(i, "for_choice_id", "input_that_chooses_num")) {
    s = `${party(i.for_choice_id.choice_owner, opts)} chooses ${i.input_that_chooses_num} for “${i.for_choice_id.choice_name}”`;
  } else {
    return "an input this page cannot read";
  }
  if (has(i, "continuation_hash")) {
    s += `, revealing the merkleized continuation ${short(i.continuation_hash, 8, 4)}`;
  }
  return s;
}

/** inputKind: deposit, choice, notify or unknown. */
export function inputKind(i) {
  if (i === "input_notify" || (has(i, "continuation_hash") && !has(i, "input_from_party") && !has(i, "for_choice_id"))) return "notify";
  if (has(i, "input_from_party")) return "deposit";
  if (has(i, "for_choice_id")) return "choice";
  return "unknown";
}

/** payout writes money a step paid out (a record's payout: to a role or an address). */
export function payout(p) {
  const what = assetsText(p.assets);
  if (p.role !== undefined && p.role !== null) return `${what} to ${party({ role_token: p.role })} (a role payout)`;
  if (p.address) return `${what} to ${party({ address: p.address })}`;
  return what;
}

/** payment writes a payment of the semantics (payment_from, to, token, amount). */
export function payment(p, opts) {
  return `${amount(p.amount, p.token)} from ${account(p.payment_from, opts)} to ${payee(p.to, opts)}`;
}

function assetsText(a) {
  if (!a) return UNKNOWN;
  const parts = [];
  if (a.lovelace !== undefined && String(a.lovelace) !== "0") parts.push(amount(a.lovelace, { currency_symbol: "", token_name: "" }));
  for (const [policy, names] of Object.entries(a.tokens || {})) {
    for (const [name, n] of Object.entries(names)) parts.push(amount(n, { currency_symbol: policy, token_name: name }));
  }
  return parts.join(" and ") || "nothing";
}

/**
 * noInputs explains a step without inputs: the contract it spent (when
 * known) waited in a When whose deadline the step's interval had passed.
 */
export function noInputs(previous, interval, opts = {}) {
  const deadline = reachedTimeout(previous);
  const from = interval && interval.from !== undefined && interval.from !== null ? Number(interval.from) : null;
  if (deadline !== null && from !== null && from >= deadline) {
    return `no inputs: the deadline of ${date(deadline, opts)} had passed, so the contract moved on`;
  }
  return "no inputs: the contract moved on by itself (a deadline passed or nothing had to be waited for)";
}

/** reachedTimeout is the timeout of the first When a contract reaches without input, or null. */
export function reachedTimeout(c) {
  for (let depth = 0; is(c) && depth < 1000; depth++) {
    if (has(c, "when", "timeout")) return Number(c.timeout);
    if (has(c, "pay", "then")) c = c.then;
    else if (has(c, "let", "then")) c = c.then;
    else if (has(c, "assert", "then")) c = c.then;
    else return null; // If: it depends; Close: none
  }
  return null;
}

/** stepKind names a history record kind for people. */
export const KIND_NAMES = {
  contract_created: "Created",
  inputs_applied: "Step",
  payout_withdrawn: "Withdrawal",
  apply_inputs_rejected: "Rejected step",
  rolled_back: "Rollback",
};

/**
 * lastAction says in a few words what a record of a contract did, for the
 * list's "Last action": "Alice deposited 100 ADA", "Bob chose 3 for
 * “price”", "notified", "a deadline passed", "closed", "created with 2
 * ADA", "payouts withdrawn". payload is the record's (or a step's
 * details).
 */
export function lastAction(kind, payload) {
  const p = payload || {};
  switch (kind) {
    case "contract_created":
      return p.assets && assetsText(p.assets) !== "nothing" ? `created with ${assetsText(p.assets)}` : "created";
    case "inputs_applied": {
      const inputs = p.inputs || [];
      let s;
      if (inputs.length === 0) s = "a deadline passed";
      else {
        s = pastInput(inputs[0]);
        if (inputs.length > 1) s += ` and ${inputs.length - 1} more input${inputs.length > 2 ? "s" : ""}`;
      }
      return p.closed ? s + "; closed" : s;
    }
    case "payout_withdrawn":
      return "payouts withdrawn";
    case "apply_inputs_rejected":
      return "a step that could not be read";
    default:
      return UNKNOWN;
  }
}

// pastInput: an input in the past tense, short.
function pastInput(i) {
  switch (inputKind(i)) {
    case "deposit":
      return `${party(i.input_from_party)} deposited ${amount(i.that_deposits, i.of_token)}`;
    case "choice":
      return `${party(i.for_choice_id.choice_owner)} chose ${i.input_that_chooses_num} for “${i.for_choice_id.choice_name}”`;
    case "notify":
      return "notified";
    default:
      return "an input this page cannot read";
  }
}
