package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// linesStore is a Store of given lines, read only: a chain as an attacker
// who can write the log's file or table leaves it.
type linesStore [][]byte

func (s linesStore) Head(context.Context) (uint64, []byte, error) {
	if len(s) == 0 {
		return 0, nil, nil
	}
	return uint64(len(s)), s[len(s)-1], nil
}

func (s linesStore) Append(context.Context, LinkFunc) error {
	return errors.New("linesStore is read only")
}

func (s linesStore) Read(ctx context.Context, from uint64, f func([]byte) error) error {
	for i := from; i < uint64(len(s)); i++ {
		if err := f(s[i]); err != nil {
			return err
		}
	}
	return nil
}

// FuzzVerifyStore: any bytes as the stored lines of a keyed tenant chain
// (one line per record), seeded with a genuine chain of the golden records
// and the checkpoint of its writer. VerifyStore, with the key, the
// checkpoint and the tenant, never panics, accepts the genuine chain and
// refuses with a *VerifyError every other (nothing an attacker without the
// key writes verifies: a changed, added, removed or reordered byte, line or
// record); VerifyStoreFrom, from a checkpoint of record k (the server's
// incremental verification), accepts exactly the chains whose lines from
// record k-1 on are the genuine ones; and a line that decodes as a Record
// that VerifyRecord accepts under the key (the console's check of a run's
// records) is a genuine record.
func FuzzVerifyStore(f *testing.F) {
	ctx := context.Background()
	key := []byte("fuzz verify store key, 32 bytes or more")
	mem := NewMemoryStore()
	log, err := NewLog(ctx, mem, LogOptions{Key: key})
	if err != nil {
		f.Fatal(err)
	}
	var cps []Checkpoint // cps[k] counts k records
	cp0, _ := log.Checkpoint()
	cps = append(cps, cp0)
	for _, r := range goldenRecords() {
		if len(r.Reason) > 100 {
			continue // a long line: slower mutations, no more paths
		}
		r.Tenant = "acme"
		if err := log.Append(ctx, r); err != nil {
			f.Fatal(err)
		}
		cp, _ := log.Checkpoint()
		cps = append(cps, cp)
	}
	var genuine [][]byte
	if err := mem.Read(ctx, 0, func(line []byte) error {
		genuine = append(genuine, bytes.Clone(line))
		return nil
	}); err != nil {
		f.Fatal(err)
	}
	records := make([]Record, len(genuine))
	for i, line := range genuine {
		if err := json.Unmarshal(line, &records[i]); err != nil {
			f.Fatal(err)
		}
	}
	all := bytes.Join(genuine, []byte("\n"))
	f.Add(all, uint8(0))
	f.Add(all, uint8(3))
	f.Add(bytes.Join(genuine[:len(genuine)-1], []byte("\n")), uint8(2))
	f.Add(bytes.Join([][]byte{genuine[0], genuine[2], genuine[1]}, []byte("\n")), uint8(1))
	f.Add(bytes.Replace(all, []byte(`"tenant":"acme"`), []byte(`"tenant":"acmf"`), 1), uint8(0))
	f.Add(bytes.Replace(all, []byte(`{"seq":0,`), []byte(`{"seq":0, `), 1), uint8(0))
	f.Add(append(bytes.Clone(all), '\n'), uint8(0))
	f.Add([]byte(`{"seq":0,"hash":"x"}`), uint8(0))

	f.Fuzz(func(t *testing.T, data []byte, from uint8) {
		var lines linesStore
		if len(data) > 0 {
			lines = bytes.Split(data, []byte("\n"))
		}
		// genuineFrom says whether lines, from k on, are the genuine
		// ones, to the end (whole) or to any record.
		genuineFrom := func(k int, whole bool) bool {
			if len(lines) > len(genuine) || whole && len(lines) != len(genuine) {
				return false
			}
			for i := k; i < len(lines); i++ {
				if !bytes.Equal(lines[i], genuine[i]) {
					return false
				}
			}
			return true
		}
		opts := VerifyOptions{Key: key, Checkpoint: &cps[len(cps)-1], Tenant: "acme"}
		n, err := VerifyStore(ctx, lines, opts)
		var ve *VerifyError
		switch {
		case genuineFrom(0, true):
			if err != nil || n != len(genuine) {
				t.Fatalf("the genuine chain: %d, %v", n, err)
			}
		case err == nil:
			t.Fatalf("accepted (%d records): %s", n, short(data))
		case !errors.As(err, &ve):
			t.Fatalf("%T %v: %s", err, err, short(data))
		}

		k := int(from) % len(cps)
		opts.Checkpoint = nil
		res, err := VerifyStoreFrom(ctx, lines, cps[k], opts)
		switch {
		case len(lines) >= k && genuineFrom(max(k-1, 0), false):
			// Records cut after the checkpoint's are not found: a newer
			// checkpoint finds them (see "Truncated audit logs").
			if err != nil || res.Records != len(lines) || res.End != cps[len(lines)] {
				t.Fatalf("from %d, the genuine chain: %+v, %v", k, res, err)
			}
		case err == nil:
			t.Fatalf("from %d, accepted (%+v): %s", k, res, short(data))
		case !errors.As(err, &ve):
			t.Fatalf("from %d: %T %v: %s", k, err, err, short(data))
		}

		for _, line := range lines {
			var r Record
			if json.Unmarshal(line, &r) != nil || VerifyRecord(&r, key) != nil {
				continue
			}
			if r.Seq >= uint64(len(records)) || !reflect.DeepEqual(r, records[r.Seq]) {
				t.Fatalf("a forged record verifies: %s", short(line))
			}
		}
	})
}

// short is the start of b, for a failure's message: the chain runs to
// tens of KiB.
func short(b []byte) string {
	if len(b) <= 300 {
		return string(b)
	}
	return fmt.Sprintf("%s... (%d bytes)", b[:300], len(b))
}
