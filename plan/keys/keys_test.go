package keys_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/plan/keys"
)

// writeStream writes ks to the part file part-NAME.keys of dir.
func writeStream(t *testing.T, dir, name string, ks ...keys.Key) {
	t.Helper()
	w, err := keys.Create(context.Background(), dir, name)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ks {
		if err := w.Write(&ks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// Every field of a key survives the file, the streams come back in the
// order of their files' names, an empty part file gives no stream and
// files that are not part files are not read.
func TestKeysRoundTrip(t *testing.T) {
	dir := t.TempDir()
	created := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	full := keys.Key{
		Table: "Events", Old: []byte{0x01, 0x80, 0, 0, 0, 0, 0, 0, 0x07}, New: []byte{0x01, 0x00, 0xff, 0x00, 0x01},
		OldText: "(7)", NewText: `(-8070450532247928832, "u\x00")`,
		First:    keys.Part{Kind: "int", Int: 7, Text: "7"},
		NewParts: []keys.Part{{Kind: "int", Int: -8070450532247928832, Text: "-8070450532247928832"}, {Kind: "bytes", Bytes: []byte{0, 1, 2}, Text: "AAEC"}},
		Columns:  2, Time: &created, TimeField: "Created", Bytes: 123, Batch: 4,
	}
	datastore := keys.Key{
		Table: "Customer", Old: []byte("old"), New: []byte("new"), OldText: `Key(Customer, "Customer1")`, NewText: `Key(Customer, "3f-Customer1")`,
		First: keys.Part{Kind: "string", Text: "Customer1", Datastore: true}, NewParts: []keys.Part{{Kind: "string", Text: "3f-Customer1", Datastore: true}},
		Columns: 1, Bytes: 40, Batch: 0,
	}
	writeStream(t, dir, "b", datastore)
	writeStream(t, dir, "a", full, datastore)
	writeStream(t, dir, "c")
	if err := os.WriteFile(filepath.Join(dir, "notes.jsonl"), []byte("not a key\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := keys.Read(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []keys.Stream{{full, datastore}, {datastore}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
}

// A damaged key is an error naming the file and the key.
func TestKeysReadBadKey(t *testing.T) {
	dir := t.TempDir()
	writeStream(t, dir, "a", keys.Key{Table: "T"})
	p := filepath.Join(dir, "part-a.keys")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, []byte("{\"t\": 1}\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = keys.Read(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "part-a.keys, key 2") {
		t.Errorf("Read: got error %v, want one naming part-a.keys, key 2", err)
	}
	_, err = keys.Load(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "part-a.keys, key 2") {
		t.Errorf("Load: got error %v, want one naming part-a.keys, key 2", err)
	}
}

// A part file of the JSON Lines format of older versions is an error
// naming it, not a file left out.
func TestKeysReadOldFormat(t *testing.T) {
	dir := t.TempDir()
	writeStream(t, dir, "a", keys.Key{Table: "T"})
	if err := os.WriteFile(filepath.Join(dir, "part-b.jsonl"), []byte(`{"t":"T","o":"AQ=="}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func() error{
		"Read": func() error { _, err := keys.Read(context.Background(), dir); return err },
		"Load": func() error { _, err := keys.Load(context.Background(), dir); return err },
	} {
		if err := read(); err == nil || !strings.Contains(err.Error(), "part-b.jsonl is not a key file of this version") {
			t.Errorf("%s: got error %v, want one saying part-b.jsonl is not a key file of this version", name, err)
		}
	}
}

func TestKeysJoin(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"gs://b/keys/", "gs://b/keys/part-x.jsonl"},
		{"gs://b/keys", "gs://b/keys/part-x.jsonl"},
		{"out/keys/", "out/keys/part-x.jsonl"},
	} {
		if got := keys.Join(tc.dir, "part-x.jsonl"); got != tc.want {
			t.Errorf("Join(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// stream makes a stream of keys named by their text, batch by batch:
// stream("a", 2, 1) is a0 a1 (batch 0), a2 (batch 1).
func stream(name string, sizes ...int) keys.Stream {
	var s keys.Stream
	for b, n := range sizes {
		for range n {
			s = append(s, keys.Key{NewText: name + string(rune('0'+len(s))), Batch: b})
		}
	}
	return s
}

// Interleave takes whole batches round-robin, so a stream with more
// batches goes on alone once the shorter ones are done, and a batch is
// never cut.
func TestInterleave(t *testing.T) {
	streams := []keys.Stream{
		stream("a", 2, 1, 3),
		stream("b", 1),
		stream("c", 1, 2, 1, 2),
		nil,
	}
	var got []string
	for _, k := range keys.Interleave(streams) {
		got = append(got, k.NewText)
	}
	want := strings.Fields(`
		a0 a1 b0 c0
		a2 c1 c2
		a3 a4 a5 c3
		c4 c5`)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Interleave = %v\nwant        %v", got, want)
	}
	if got := keys.Interleave(nil); len(got) != 0 {
		t.Errorf("Interleave(nil) = %v, want nothing", got)
	}
}
