package runtime

// EffectiveLimits returns the limits an invocation with Request.Limits l
// runs under: l's zero fields filled from Config.Limits, then from the
// defaults. A caller that must fit its requests under them (the chain, which
// bounds a transformer's modify by what the bindings after it accept) asks
// here instead of copying the rule.
func (r *Runtime) EffectiveLimits(l Limits) Limits {
	return mergeLimits(l, r.cfg.Limits).WithDefaults()
}
