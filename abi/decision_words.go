package abi

// Seed 002's guardrail words and the fields ABI 1.2 adds to the canonical
// form. They live here, beside decision.go, so that the decoder's 1.0 text
// stays as it was.

// guardrailWords are seed 002's GuardrailAction words that are not also
// canonical actions ("block" is both, and decodes as canonical).
var guardrailWords = map[string]bool{"allow": true, "rewrite": true, "require_approval": true}

// guardrailKeys are the fields a guardrail decision may carry, by word.
var guardrailKeys = map[string]map[string]bool{
	"allow":            {"action": true, "reason": true, "user_message": true, "do_not_reply_again": true, "short_circuit": true},
	"rewrite":          {"action": true, "payload": true, "reason": true, "user_message": true, "do_not_reply_again": true},
	"require_approval": {"action": true, "pending": true, "reason": true, "user_message": true, "do_not_reply_again": true},
}

// decodeGuardrail decodes seed 002's {"action": word, ...}: allow is a
// continue, rewrite a modify of the fields in "payload", require_approval
// an ask whose approval carries "pending".
func decodeGuardrail(m map[string]any, word string) (*Decision, error) {
	if k, ok := unexpectedKey(m, guardrailKeys[word]); ok {
		return nil, decisionErrorf("unexpected field %q in a decision with action %q", k, word)
	}
	d := &Decision{Shape: ShapeGuardrail}
	switch word {
	case "allow":
		d.Action = ActionContinue
	case "rewrite":
		d.Action = ActionModify
		p, ok := m["payload"].(map[string]any)
		if !ok {
			return nil, decisionErrorf(`rewrite needs a "payload" object of the fields it changes`)
		}
		if len(p) == 0 {
			return nil, decisionErrorf("rewrite changes no field")
		}
		d.Context = p
	case "require_approval":
		d.Action = ActionAsk
	}
	if err := decodeCommon(d, m); err != nil {
		return nil, err
	}
	if err := decodeAdded(d, m); err != nil {
		return nil, err
	}
	return d, nil
}

// decodeAdded decodes the fields ABI 1.2 adds to a decision with an
// "action": "pending" (ask only: an object, null or {} meaning none) and
// "short_circuit" (a boolean, null meaning false; true only on a continue).
func decodeAdded(d *Decision, m map[string]any) error {
	if p, ok := m["pending"]; ok {
		if d.Action != ActionAsk {
			return decisionErrorf(`"pending" is only allowed with ask or require_approval`)
		}
		if p != nil {
			obj, ok := p.(map[string]any)
			if !ok {
				return decisionErrorf(`"pending" must be an object`)
			}
			if len(obj) > 0 {
				d.Pending = obj
			}
		}
	}
	if s, ok := m["short_circuit"]; ok && s != nil {
		b, ok := s.(bool)
		if !ok {
			return decisionErrorf(`"short_circuit" must be a boolean`)
		}
		if b && d.Action != ActionContinue {
			return decisionErrorf(`"short_circuit": true is only allowed with continue or allow`)
		}
		d.ShortCircuit = b
	}
	return nil
}
