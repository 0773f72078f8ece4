package audit

// VerifyRecord checks one record on its own, as read back from an index or
// an API: its Hash is the hash of its content and, when key is not nil, its
// MAC verifies under key (the chain's key, as VerifyOptions.Key). Where it
// stands in its chain (its Seq, and its Prev against the record before) is
// not checked: VerifyFrom and VerifyWith check that over a run of records.
// It returns nil or a *VerifyError.
func VerifyRecord(r *Record, key []byte) error {
	if err := VerifyFrom(r.Prev, r.Seq, []Record{*r}); err != nil {
		return err
	}
	if key == nil {
		return nil
	}
	k, err := deriveKeys(key)
	if err != nil {
		return err
	}
	return k.checkRecord(0, r)
}
