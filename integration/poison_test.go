package integration

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// poison is a record the migration must refuse: a marker that finds its
// dead letter, the stage that must refuse it and words its reason must
// contain.
type poison struct {
	tag    string
	stage  string
	reason []string
}

// poisonLine is a poison as an input line.
type poisonLine struct {
	line string
	p    poison
}

// mixPoisons spreads the poison lines evenly through the good ones and
// returns the input and its poisons, in input order.
func mixPoisons(good []string, bad []poisonLine) ([]string, []poison) {
	var lines []string
	var poisons []poison
	step := len(good)/len(bad) + 1
	for i, l := range good {
		lines = append(lines, l)
		if i%step == step/2 {
			lines = append(lines, bad[i/step].line)
			poisons = append(poisons, bad[i/step].p)
		}
	}
	return lines, poisons
}

// checkPoisonDeadLetters checks that the dead letters are exactly the
// poisons, each once, at its stage and with its reason; a dead letter is
// matched to its poison by the tag in its record or raw line.
func checkPoisonDeadLetters(t *testing.T, dead []record.DeadLetter, poisons []poison) {
	t.Helper()
	found := map[string]int{}
	for _, d := range dead {
		text := string(d.RawBytes()) + string(d.Record)
		var p *poison
		for i := range poisons {
			if strings.Contains(text, `"poison:`+poisons[i].tag+`"`) {
				p = &poisons[i]
			}
		}
		if p == nil {
			t.Errorf("unexpected dead letter (stage %s): %.300s", d.Stage, d.Reason)
			continue
		}
		found[p.tag]++
		t.Logf("poison %s: stage %s: %.200s", p.tag, d.Stage, d.Reason)
		if d.Stage != p.stage {
			t.Errorf("poison %s: dead-lettered at stage %q, want %q: %.300s", p.tag, d.Stage, p.stage, d.Reason)
		}
		for _, w := range p.reason {
			if !strings.Contains(d.Reason, w) {
				t.Errorf("poison %s: reason %.300q does not say %q", p.tag, d.Reason, w)
			}
		}
		if d.Source == "" {
			t.Errorf("poison %s: dead letter without a source", p.tag)
		}
		if d.Stage == record.StageRead && d.RawBytes() == nil || d.Stage != record.StageRead && len(d.Record) == 0 {
			t.Errorf("poison %s: dead letter without its input: %+v", p.tag, d)
		}
	}
	for _, p := range poisons {
		if found[p.tag] != 1 {
			t.Errorf("poison %s: %d dead letters, want 1", p.tag, found[p.tag])
		}
	}
}

// poisonCounters checks the counters of a run over good records and
// poisons: every record is read (read = written + dead_lettered), what
// is refused while reading or rewriting is not rewritten.
func poisonCounters(t *testing.T, res *migration.Result, good int, poisons []poison) {
	t.Helper()
	by := map[string]int64{}
	for _, p := range poisons {
		by[p.stage]++
	}
	read := int64(good) + int64(len(poisons)) // every record, refused at read or not
	wantCounters(t, res, read, read-by[record.StageRead]-by[record.StageRewrite], int64(good), int64(len(poisons)))
}

// The target of the Spanner half of TestPoisonRecords: shard on UserId
// puts ShardId first; the key is ShardId (8 bytes), UserId (its UTF-8
// bytes) and Seq (8 bytes).
const poisonSpannerDDL = `CREATE TABLE Events (
  ShardId INT64 NOT NULL,
  UserId STRING(MAX) NOT NULL,
  Seq INT64 NOT NULL,
  Code STRING(10),
  Note STRING(MAX),
  Score FLOAT64
) PRIMARY KEY (ShardId, UserId, Seq)`

// TestPoisonRecords mixes poison records into a few thousand good ones and
// migrates them with the real pipeline on every local runner, into Spanner
// (from JSON Lines and from CSV) and into Datastore (from JSON Lines).
// Every poison must be a dead letter at the stage that can see the
// problem, with a reason that names it, and must not stop the job; every
// good record, including ones just inside each limit, must land exactly
// once with its values; the counters must add up.
//
// Where each poison is caught:
//   - invalid UTF-8 in a JSON line (a key name, a key column or any
//     value): the JSON Lines reader (record.ParseJSON), stage read;
//   - invalid UTF-8 in a CSV field (key column or value): the CSV
//     reader, stage read, the line's bytes kept in raw_base64;
//   - a Spanner key over 8 KiB (counted in bytes: 8 for each INT64, the
//     UTF-8 bytes of a STRING): the rewrite (rewrite.ValidateSpannerKey on
//     the rewritten key), stage rewrite;
//   - a value over STRING(10): the Spanner sink's conversion, stage write;
//   - "/" in a Datastore kind or key name: the rewrite
//     (rewrite.ValidateDatastoreKey on the source key), stage rewrite;
//   - a Datastore entity over 1 MiB: Datastore refuses it and the writer
//     isolates it, stage write.
func TestPoisonRecords(t *testing.T) {
	t.Run("spanner", testPoisonSpanner)
	t.Run("datastore", testPoisonDatastore)
}

func testPoisonSpanner(t *testing.T) {
	emulator.RequireSpanner(t)
	const good = 3000
	sr := spannerRewriter(t, rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 8, "mode": "abs", "columns": []any{"UserId"}}},
		"UserId STRING(MAX), Seq INT64")
	outKey := sr.Out()
	// The longest UserId whose rewritten key is exactly Spanner's limit.
	maxUser := rewrite.MaxSpannerKeyBytes - 16

	type row struct {
		user  string
		seq   int64
		code  string
		note  string // "" for NULL
		score float64
	}
	var rows []row
	for i := range good {
		r := row{user: fmt.Sprintf("user-%04d", i%700), seq: int64(i), code: fmt.Sprintf("C%d", i), score: float64(i) / 8}
		if i%4 == 0 {
			r.note = fmt.Sprintf("note %d: \"quoted\", ünïcode, a/b", i)
		}
		switch i {
		case 1: // exactly at the key limit
			r.user = strings.Repeat("k", maxUser)
		case 2: // at the limit in two-byte characters
			r.user = strings.Repeat("é", maxUser/2)
		case 3: // "/" is an ordinary character in a Spanner key
			r.user = "user/with/slashes"
		case 4: // exactly STRING(10)
			r.code = "ABCDEFGHIJ"
		case 5: // STRING(10) counts characters, not bytes
			r.code = "ÄÖÜäöüßéèê"
		}
		rows = append(rows, r)
	}
	want := map[string]record.Record{}
	for _, r := range rows {
		nk, err := sr.Rewrite(nil, []rewrite.Value{rewrite.String(r.user), rewrite.Int64(r.seq)})
		if err != nil {
			t.Fatalf("good row %.40q: %v", r.user, err)
		}
		note := record.Value{}
		if r.note != "" {
			note = record.String(r.note)
		}
		want[keyText(nk)] = record.Record{Table: "Events", Fields: []record.Field{
			{Name: "ShardId", Value: record.Int(nk[0].Int)},
			{Name: "UserId", Value: record.String(r.user)},
			{Name: "Seq", Value: record.Int(r.seq)},
			{Name: "Code", Value: record.String(r.code)},
			{Name: "Note", Value: note},
			{Name: "Score", Value: record.Float(r.score)},
		}}
	}
	if len(want) != good {
		t.Fatalf("keys collide: %d for %d rows", len(want), good)
	}
	over := strings.Repeat("k", maxUser+1)
	overWide := strings.Repeat("é", maxUser/2) + "k" // 4,088 characters, 8,177 bytes

	// JSON Lines, the poisons spread through the good lines.
	jsonLine := func(r row) string {
		l := fmt.Sprintf(`{"UserId": %q, "Seq": %d, "Code": %q, "Score": %v`, r.user, r.seq, r.code, r.score)
		if r.note != "" {
			l += fmt.Sprintf(`, "Note": %q`, r.note)
		}
		return l + "}"
	}
	goodLines := make([]string, len(rows))
	for i, r := range rows {
		goodLines[i] = jsonLine(r)
	}
	lines, jsonPoisons := mixPoisons(goodLines, []poisonLine{
		{"{\"UserId\": \"bad-\xff-utf8\", \"Seq\": 1, \"Note\": \"poison:utf8-key\"}",
			poison{"utf8-key", record.StageRead, []string{"UTF-8"}}},
		{"{\"UserId\": \"u\", \"Seq\": 2, \"Code\": \"\xc3\x28\", \"Note\": \"poison:utf8-value\"}",
			poison{"utf8-value", record.StageRead, []string{"UTF-8"}}},
		{fmt.Sprintf(`{"UserId": %q, "Seq": 3, "Note": "poison:key-over-8kib"}`, over),
			poison{"key-over-8kib", record.StageRewrite, []string{"key is 8193 bytes", "8192"}}},
		{fmt.Sprintf(`{"UserId": %q, "Seq": 4, "Note": "poison:key-over-8kib-wide"}`, overWide),
			poison{"key-over-8kib-wide", record.StageRewrite, []string{"key is 8193 bytes", "8192"}}},
		{`{"UserId": "u", "Seq": 5, "Code": "ABCDEFGHIJK", "Note": "poison:string-10"}`,
			poison{"string-10", record.StageWrite, []string{"STRING(10)"}}},
	})
	jsonIn := writeLines(t, "events.jsonl", lines)

	// CSV: the reader checks UTF-8, as the JSON Lines reader does.
	csvLine := func(user string, seq int64, code, note string, score float64) string {
		q := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
		return strings.Join([]string{q(user), fmt.Sprint(seq), q(code), q(note), fmt.Sprint(score)}, ",")
	}
	csvLines := []string{"UserId,Seq,Code,Note,Score"}
	for _, r := range rows {
		csvLines = append(csvLines, csvLine(r.user, r.seq, r.code, r.note, r.score))
	}
	csvLines = append(csvLines,
		csvLine("bad-\xff-utf8", 1, "", "poison:utf8-key", 0),
		csvLine("u", 2, "\xc3\x28", "poison:utf8-value", 0),
		csvLine(over, 3, "", "poison:key-over-8kib", 0),
		csvLine("u", 5, "ABCDEFGHIJK", "poison:string-10", 0),
	)
	csvPoisons := []poison{
		{"utf8-key", record.StageRead, []string{"UTF-8", "column UserId"}},
		{"utf8-value", record.StageRead, []string{"UTF-8", "column Code"}},
		{"key-over-8kib", record.StageRewrite, []string{"key is 8193 bytes", "8192"}},
		{"string-10", record.StageWrite, []string{"STRING(10)"}},
	}
	// CSV has no NULL but the empty field, and rekey reads it as NULL.
	csvIn := writeLines(t, "events.csv", csvLines)

	cases := []struct {
		name, source string
		poisons      []poison
		runners      []string
	}{
		{"jsonl", fmt.Sprintf(`{type: jsonl, path: %q, key: "UserId STRING(MAX), Seq INT64"}`, jsonIn), jsonPoisons, runners},
		{"csv", fmt.Sprintf(`{type: csv, path: %q, key: "UserId STRING(MAX), Seq INT64"}`, csvIn), csvPoisons, []string{"prism"}},
	}
	for _, tc := range cases {
		for _, runner := range tc.runners {
			t.Run(tc.name+"/"+runner, func(t *testing.T) {
				dstID, dst := newSpannerTarget(t, "poison-"+tc.name+"-"+runner, poisonSpannerDDL)
				cfg := loadYAML(t, fmt.Sprintf(`
source: %s
target: {type: spanner, project: %s, instance: %s, database: %s, table: Events}
rewrite: {strategy: shard, params: {n: 8, mode: abs, columns: [UserId]}}
dead_letter: %q
`, tc.source, emulator.SpannerProject(), emulator.SpannerInstance(), dstID, filepath.Join(t.TempDir(), "dead.jsonl")))
				start := time.Now()
				res := migrate(t, cfg, runner)
				t.Logf("%s in %s", res.Counters.String(), time.Since(start).Round(time.Millisecond))
				poisonCounters(t, res, good, tc.poisons)
				checkPoisonDeadLetters(t, readDeadLetters(t, cfg.DeadLetter), tc.poisons)
				checkSpannerRows(t, tc.name, readRows(t, dst, "Events"), outKey, want)
			})
		}
	}
}

func testPoisonDatastore(t *testing.T) {
	c := emulator.TestDatastore(t)
	const good = 3000
	rw := datastoreRewriter(t, rewrite.StepConfig{Strategy: "hashprefix"})
	var ents []entityLine
	base := time.Date(2021, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := range good {
		path := []rewrite.PathElement{{Kind: "Customer", Name: fmt.Sprintf("Customer%d", i)}}
		if i%3 == 0 {
			path = []rewrite.PathElement{{Kind: "Customer", ID: int64(i + 1)}}
		}
		at := base.Add(time.Duration(i) * time.Minute)
		blob := []byte{byte(i), 0, 0xff, byte(i >> 8)}
		note := fmt.Sprintf("note %d", i)
		switch i {
		case 1: // an entity just under 1 MiB, its note too large to index
			note = strings.Repeat("n", datastoredb.MaxEntityBytes-50_000)
		case 2: // a name whose rewrite ("xxxx-" + name) is of the longest length
			path[0].Name = strings.Repeat("x", rewrite.MaxDatastoreNameBytes-5)
		case 4: // "." is refused in property names only
			path[0].Name = "with.dot"
		case 5:
			path[0].Name = "ünïcode 🙂"
		}
		line := fmt.Sprintf(`{"__key__": %s, "Name": "Kunde %d", "Since": {"$timestamp": %q}, "Avatar": {"$bytes": %q}, "Count": %d, "Note": {"$noindex": %q}}`,
			j2dKeyJSON(path), i, at.Format(time.RFC3339Nano), base64.StdEncoding.EncodeToString(blob), i*7, note)
		ents = append(ents, entityLine{path: path, line: line, want: []record.Field{
			{Name: "Name", Value: record.String(fmt.Sprintf("Kunde %d", i))},
			{Name: "Since", Value: record.Time(at)},
			{Name: "Avatar", Value: record.Bytes(blob)},
			{Name: "Count", Value: record.Int(int64(i * 7))},
			{Name: "Note", Value: record.String(note), NoIndex: true},
		}})
	}
	big := strings.Repeat("b", 600_000)
	goodLines := make([]string, len(ents))
	for i, e := range ents {
		goodLines[i] = e.line
	}
	lines, poisons := mixPoisons(goodLines, []poisonLine{
		{"{\"__key__\": {\"path\": [\"Customer\", \"bad-\xff-utf8\"]}, \"Tag\": \"poison:utf8-name\"}",
			poison{"utf8-name", record.StageRead, []string{"UTF-8"}}},
		{"{\"__key__\": {\"path\": [\"Customer\", \"utf8-value\"]}, \"Name\": \"\xed\xa0\x80\", \"Tag\": \"poison:utf8-value\"}",
			poison{"utf8-value", record.StageRead, []string{"UTF-8"}}},
		{`{"__key__": {"path": ["Customer", "a/b"]}, "Tag": "poison:slash-name"}`,
			poison{"slash-name", record.StageRewrite, []string{`name contains "/"`, "a/b"}}},
		{`{"__key__": {"path": ["Cust/omer", "ok"]}, "Tag": "poison:slash-kind"}`,
			poison{"slash-kind", record.StageRewrite, []string{`kind contains "/"`}}},
		{fmt.Sprintf(`{"__key__": {"path": ["Customer", "huge"]}, "A": %q, "B": %q, "Tag": "poison:entity-over-1mib"}`, big, big),
			poison{"entity-over-1mib", record.StageWrite, []string{"1048576"}}},
		{fmt.Sprintf(`{"__key__": {"path": ["Customer", "huge-value"]}, "A": %q, "Tag": "poison:value-over-1mib"}`, big+big),
			poison{"value-over-1mib", record.StageWrite, []string{`property "A"`, "longer than"}}},
	})
	in := writeLines(t, "customers.jsonl", lines)

	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dstNS := emulator.UniqueNamespace("poison-" + runner)
			want := map[string]record.Record{}
			for _, e := range ents {
				nk, err := rw.Rewrite(rewrite.DatastoreKey{Path: e.path})
				if err != nil {
					t.Fatalf("good entity %v: %v", e.path, err)
				}
				nk.Namespace = dstNS
				want[nk.String()] = record.Record{Key: &nk, Fields: e.want}
			}
			if len(want) != good {
				t.Fatalf("new keys collide: %d for %d entities", len(want), good)
			}
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, in, emulator.DatastoreProject(), dstNS, filepath.Join(t.TempDir(), "dead.jsonl")))
			start := time.Now()
			res := migrate(t, cfg, runner)
			t.Logf("%s in %s", res.Counters.String(), time.Since(start).Round(time.Millisecond))
			poisonCounters(t, res, good, poisons)
			checkPoisonDeadLetters(t, readDeadLetters(t, cfg.DeadLetter), poisons)
			checkEntities(t, "datastore", readEntities(t, c, dstNS, "Customer"), want)
			if n := countEntities(t, c, dstNS, "Cust/omer"); n != 0 {
				t.Errorf("%d entities of kind Cust/omer landed", n)
			}
		})
	}
}
