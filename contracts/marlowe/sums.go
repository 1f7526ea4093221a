package marlowe

// The constructors of the sum types that schema.go reads and writes: for
// each, the slots function gives a node's Plutus Data index and its fields
// in Plutus Data order with their core JSON keys, and the table lists the
// constructors by index. Core JSON writes the keys in alphabetical order.

// The kinds of the integer fields, by their name in a shape error.
var (
	timeoutField       = intField("timeout")
	constantField      = intField("constant")
	depositAmountField = intField("deposit amount")
	chosenNumField     = intField("chosen number")
	warningIntField    = intField("integer") // JSON only
)

// The sum types, set in init: their slots functions name the kinds of
// field, whose readers and writers name the sum types.
var (
	contractSum     *sumType[Contract]
	actionSum       *sumType[Action]
	valueSum        *sumType[Value]
	observationSum  *sumType[Observation]
	inputContentSum *sumType[InputContent]
	warningSum      *sumType[TransactionWarning]
)

func init() {
	contractSum = (&sumType[Contract]{name: "Contract", unknown: "contract", jsonWhat: "contract node", slots: contractSlots,
		ctors: []ctor[Contract]{
			{new: func() Contract { return closeContract }, atom: "close"},
			{new: func() Contract { return new(Pay) }}, {new: func() Contract { return new(If) }},
			{new: func() Contract { return new(When) }}, {new: func() Contract { return new(Let) }},
			{new: func() Contract { return new(Assert) }},
		}}).describe()
	actionSum = (&sumType[Action]{name: "Action", jsonWhat: "action", slots: actionSlots, ctors: []ctor[Action]{
		{new: func() Action { return new(Deposit) }}, {new: func() Action { return new(Choice) }},
		{new: func() Action { return new(Notify) }},
	}}).describe()
	valueSum = (&sumType[Value]{name: "Value", unknown: "value", jsonWhat: "value", slots: valueSlots, ctors: []ctor[Value]{
		{new: func() Value { return new(AvailableMoney) }, sortedRead: true}, {new: func() Value { return new(Constant) }},
		{new: func() Value { return new(NegValue) }}, {new: func() Value { return new(AddValue) }},
		{new: func() Value { return new(SubValue) }}, {new: func() Value { return new(MulValue) }},
		{new: func() Value { return new(DivValue) }}, {new: func() Value { return new(ChoiceValue) }},
		{new: func() Value { return timeStart }, atom: "time_interval_start"},
		{new: func() Value { return timeEnd }, atom: "time_interval_end"},
		{new: func() Value { return new(UseValue) }}, {new: func() Value { return new(Cond) }},
	}}).describe()
	observationSum = (&sumType[Observation]{name: "Observation", jsonWhat: "observation", slots: observationSlots,
		ctors: []ctor[Observation]{
			{new: func() Observation { return new(AndObs) }}, {new: func() Observation { return new(OrObs) }},
			{new: func() Observation { return new(NotObs) }}, {new: func() Observation { return new(ChoseSomething) }},
			{new: func() Observation { return new(ValueGE) }}, {new: func() Observation { return new(ValueGT) }},
			{new: func() Observation { return new(ValueLT) }}, {new: func() Observation { return new(ValueLE) }},
			{new: func() Observation { return new(ValueEQ) }},
			{new: func() Observation { return trueObservation }, atom: true},
			{new: func() Observation { return falseObservation }, atom: false},
		}}).describe()
	inputContentSum = (&sumType[InputContent]{name: "InputContent", jsonName: "Input", unknown: "input", jsonWhat: "input content",
		slots: inputContentSlots, ctors: []ctor[InputContent]{
			{new: func() InputContent { return new(IDeposit) }, sortedRead: true},
			{new: func() InputContent { return new(IChoice) }},
			{new: func() InputContent { return notifyInput }, atom: "input_notify"},
		}}).describe()
	warningSum = (&sumType[TransactionWarning]{name: "TransactionWarning", unknown: "warning", jsonWhat: "transaction warning",
		slots: warningSlots, ctors: []ctor[TransactionWarning]{
			{new: func() TransactionWarning { return new(TransactionNonPositiveDeposit) }},
			{new: func() TransactionWarning { return new(TransactionNonPositivePay) }},
			{new: func() TransactionWarning { return new(TransactionPartialPay) }},
			{new: func() TransactionWarning { return new(TransactionShadowing) }},
			{new: func() TransactionWarning { return new(TransactionAssertionFailed) }, atom: "assertion_failed"},
		}}).describe()
}

func contractSlots(ct Contract) (int, slots) {
	switch x := ct.(type) {
	case *Close:
		return 0, slots{}
	case *Pay:
		return 1, slots{slotOf("from_account", &x.From, partyField), slotOf("to", &x.To, payeeField),
			slotOf("token", &x.Token, tokenField), slotOf("pay", &x.Value, valueField), slotOf("then", &x.Then, contractField)}
	case *If:
		return 2, slots{slotOf("if", &x.Observation, observationField), slotOf("then", &x.Then, contractField), slotOf("else", &x.Else, contractField)}
	case *When:
		return 3, slots{slotOf("when", &x.Cases, casesField), slotOf("timeout", &x.Timeout, timeoutField),
			slotOf("timeout_continuation", &x.TimeoutContinuation, contractField)}
	case *Let:
		return 4, slots{slotOf("let", &x.Name, valueIDField), slotOf("be", &x.Value, valueField), slotOf("then", &x.Then, contractField)}
	case *Assert:
		return 5, slots{slotOf("assert", &x.Observation, observationField), slotOf("then", &x.Then, contractField)}
	}
	return -1, slots{}
}

func actionSlots(a Action) (int, slots) {
	switch x := a.(type) {
	case *Deposit:
		return 0, slots{slotOf("into_account", &x.IntoAccount, partyField), slotOf("party", &x.From, partyField),
			slotOf("of_token", &x.Token, tokenField), slotOf("deposits", &x.Amount, valueField)}
	case *Choice:
		return 1, slots{slotOf("for_choice", &x.Choice, choiceIDField), slotOf("choose_between", &x.Bounds, boundsField)}
	case *Notify:
		return 2, slots{slotOf("notify_if", &x.Observation, observationField)}
	}
	return -1, slots{}
}

// binary is the two operands of a binary node under their JSON keys.
func binary[T any](k kind[T], left string, l *T, right string, r *T) slots {
	return slots{slotOf(left, l, k), slotOf(right, r, k)}
}

func valueSlots(v Value) (int, slots) {
	switch x := v.(type) {
	case *AvailableMoney:
		return 0, slots{slotOf("in_account", &x.Account, partyField), slotOf("amount_of_token", &x.Token, tokenField)}
	case *Constant:
		return 1, slots{slotOf("", &x.N, constantField)}
	case *NegValue:
		return 2, slots{slotOf("negate", &x.Value, valueField)}
	case *AddValue:
		return 3, binary(valueField, "add", &x.Left, "and", &x.Right)
	case *SubValue:
		return 4, binary(valueField, "value", &x.Left, "minus", &x.Right)
	case *MulValue:
		return 5, binary(valueField, "multiply", &x.Left, "times", &x.Right)
	case *DivValue:
		return 6, binary(valueField, "divide", &x.Left, "by", &x.Right)
	case *ChoiceValue:
		return 7, slots{slotOf("value_of_choice", &x.Choice, choiceIDField)}
	case *TimeIntervalStart:
		return 8, slots{}
	case *TimeIntervalEnd:
		return 9, slots{}
	case *UseValue:
		return 10, slots{slotOf("use_value", &x.Name, valueIDField)}
	case *Cond:
		return 11, slots{slotOf("if", &x.Observation, observationField), slotOf("then", &x.Then, valueField), slotOf("else", &x.Else, valueField)}
	}
	return -1, slots{}
}

func observationSlots(o Observation) (int, slots) {
	switch x := o.(type) {
	case *AndObs:
		return 0, binary(observationField, "both", &x.Left, "and", &x.Right)
	case *OrObs:
		return 1, binary(observationField, "either", &x.Left, "or", &x.Right)
	case *NotObs:
		return 2, slots{slotOf("not", &x.Observation, observationField)}
	case *ChoseSomething:
		return 3, slots{slotOf("chose_something_for", &x.Choice, choiceIDField)}
	case *ValueGE:
		return 4, binary(valueField, "value", &x.Left, "ge_than", &x.Right)
	case *ValueGT:
		return 5, binary(valueField, "value", &x.Left, "gt", &x.Right)
	case *ValueLT:
		return 6, binary(valueField, "value", &x.Left, "lt", &x.Right)
	case *ValueLE:
		return 7, binary(valueField, "value", &x.Left, "le_than", &x.Right)
	case *ValueEQ:
		return 8, binary(valueField, "value", &x.Left, "equal_to", &x.Right)
	case *TrueObs:
		return 9, slots{}
	case *FalseObs:
		return 10, slots{}
	}
	return -1, slots{}
}

func inputContentSlots(ic InputContent) (int, slots) {
	switch x := ic.(type) {
	case *IDeposit:
		return 0, slots{slotOf("into_account", &x.IntoAccount, partyField), slotOf("input_from_party", &x.From, partyField),
			slotOf("of_token", &x.Token, tokenField), slotOf("that_deposits", &x.Amount, depositAmountField)}
	case *IChoice:
		return 1, slots{slotOf("for_choice_id", &x.Choice, choiceIDField), slotOf("input_that_chooses_num", &x.ChosenNum, chosenNumField)}
	case *INotify:
		return 2, slots{}
	}
	return -1, slots{}
}

// warningSlots lists the fields of a warning in the order the JSON reader
// reads them: warnings have no Plutus Data.
func warningSlots(tw TransactionWarning) (int, slots) {
	switch x := tw.(type) {
	case *TransactionNonPositiveDeposit:
		return 0, slots{slotOf("asked_to_deposit", &x.Amount, warningIntField), slotOf("in_account", &x.Account, partyField),
			slotOf("of_token", &x.Token, tokenField), slotOf("party", &x.Party, partyField)}
	case *TransactionNonPositivePay:
		return 1, slots{slotOf("account", &x.Account, partyField), slotOf("of_token", &x.Token, tokenField),
			slotOf("to_payee", &x.Payee, payeeField), slotOf("asked_to_pay", &x.Amount, warningIntField)}
	case *TransactionPartialPay:
		return 2, slots{slotOf("account", &x.Account, partyField), slotOf("of_token", &x.Token, tokenField),
			slotOf("to_payee", &x.Payee, payeeField), slotOf("asked_to_pay", &x.Expected, warningIntField),
			slotOf("but_only_paid", &x.Paid, warningIntField)}
	case *TransactionShadowing:
		return 3, slots{slotOf("had_value", &x.OldValue, warningIntField), slotOf("is_now_assigned", &x.NewValue, warningIntField),
			slotOf("value_id", &x.Name, valueIDField)}
	case *TransactionAssertionFailed:
		return 4, slots{}
	}
	return -1, slots{}
}
