package sink

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// TestEntityLines encodes a batch as entity JSON lines, the target's
// project in every key; a record Datastore cannot hold is a dead letter
// of the write stage carrying the record, the others are still written.
func TestEntityLines(t *testing.T) {
	k := rewrite.DatastoreKey{Namespace: "ns", Path: []rewrite.PathElement{{Kind: "A", Name: "a"}}}
	recs := []record.Record{
		{Key: &k, Fields: []record.Field{{Name: "n", Value: record.Int(1 << 60)}, {Name: "s", Value: record.String("x"), NoIndex: true}}},
		{Table: "T", Fields: []record.Field{{Name: "Id", Value: record.Int(1)}}},
		{Key: &k, Fields: []record.Field{{Name: "bad", Value: record.String("\xff")}}},
	}
	var out []string
	var dead []string
	f := &entityLinesFn{Path: "out.json", Project: "p"}
	if err := f.ProcessElement(context.Background(), record.Batch{Recs: recs}, func(b []byte) { out = append(out, string(b)) }, func(d string) { dead = append(dead, d) }); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || strings.Count(out[0], "\n") != 1 {
		t.Fatalf("emitted %q, want one chunk of one line", out)
	}
	got, err := datastoredb.ParseEntityJSON([]byte(strings.TrimSuffix(out[0], "\n")), "p")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(&record.Record{Table: "A", Key: &k, Fields: recs[0].Fields}) || !strings.Contains(out[0], `"projectId":"p"`) {
		t.Errorf("wrote %s, want %v in project p", out[0], recs[0])
	}
	wantReasons := []string{"record has no Datastore key", "not valid UTF-8"}
	if len(dead) != len(wantReasons) {
		t.Fatalf("dead letters %q, want %d", dead, len(wantReasons))
	}
	for i, line := range dead {
		d, rec, err := record.ParseDeadLetter([]byte(line))
		if i == 1 {
			// A record not in UTF-8 is kept exactly, in record_base64 (the
			// record format would turn its byte into U+FFFD), and a redrive
			// cannot take it (record.ParseDeadLetter refuses it).
			if err == nil || errors.Is(err, record.ErrNotDeadLetter) || len(d.Record) != 0 || strings.Contains(line, `\ufffd`) {
				t.Errorf("dead letter %s (error %v): want the record in record_base64, refused", line, err)
			}
			if got, _ := record.DecodeBatch(d.RecordBase64); len(got) != 1 || record.Diff(&got[0], &recs[2]) != "" {
				t.Errorf("record_base64 holds %v, want %v", got, recs[2])
			}
			rec = &recs[2]
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Stage != record.StageWrite || d.Source != "out.json" || rec == nil || !strings.Contains(d.Reason, wantReasons[i]) {
			t.Errorf("dead letter %+v (record %v), want stage write from out.json with its record and %q", d, rec, wantReasons[i])
		}
	}
}
