package integration

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// j2dKeyJSON renders a key path as the JSON Lines notation, by hand.
func j2dKeyJSON(path []rewrite.PathElement) string {
	var parts []string
	for _, e := range path {
		parts = append(parts, strconv.Quote(e.Kind))
		if e.IsName() {
			parts = append(parts, strconv.Quote(e.Name))
		} else {
			parts = append(parts, strconv.FormatInt(e.ID, 10))
		}
	}
	return `{"path": [` + strings.Join(parts, ", ") + `]}`
}

// entityLine is an entity as a JSON line, with its key path and the
// properties it must read back with.
type entityLine struct {
	path []rewrite.PathElement
	line string
	want []record.Field
}

// TestMigrateJSONLToDatastore loads JSON Lines entities (Customer roots
// named Customer1.., "21" and "'quoted", with ids 1.., Order children)
// whose properties use every typed wrapper ($timestamp, $bytes, $geo,
// $key, $noindex) and plain JSON (numbers, strings, booleans, null,
// arrays, objects as embedded entities) into a Datastore namespace with
// reverse on every path element, rewriting the Friend references, plus an
// entity named "a/b" and one with a property "a.b", on every local
// runner. Every good entity arrives exactly once under its independently
// computed key (id 21 and name "21" stay distinct) with equal values; the
// two bad ones are dead letters of stage rewrite; a re-run converges.
func TestMigrateJSONLToDatastore(t *testing.T) {
	c := emulator.TestDatastore(t)
	var roots [][]rewrite.PathElement
	for i := 1; i <= 400; i++ {
		roots = append(roots, []rewrite.PathElement{{Kind: "Customer", Name: fmt.Sprintf("Customer%d", i)}})
	}
	for i := 1; i <= 150; i++ {
		roots = append(roots, []rewrite.PathElement{{Kind: "Customer", ID: int64(i)}})
	}
	roots = append(roots,
		[]rewrite.PathElement{{Kind: "Customer", Name: "21"}}, // reversed "12": quoted, unlike id 21's "12"
		[]rewrite.PathElement{{Kind: "Customer", Name: "'quoted"}},
		[]rewrite.PathElement{{Kind: "Customer", Name: "日本 🙂"}},
	)
	var ents []entityLine
	base := time.Date(2022, 6, 1, 10, 0, 0, 0, time.UTC)
	for i, path := range roots {
		at := base.Add(time.Duration(i)*time.Minute + time.Duration(i*7)*time.Microsecond)
		blob := []byte{0, byte(i), 0xff, byte(i >> 8)}
		lat, lng := float64(i%180)-89.5, float64(i%360)-179.75
		friend := roots[(i*31+7)%len(roots)]
		props := []string{
			fmt.Sprintf(`"Name": "Kunde %d"`, i),
			fmt.Sprintf(`"Since": {"$timestamp": %q}`, at.Format(time.RFC3339Nano)),
			fmt.Sprintf(`"Avatar": {"$bytes": %q}`, base64.StdEncoding.EncodeToString(blob)),
			fmt.Sprintf(`"Home": {"$geo": [%v, %v]}`, lat, lng),
			`"Friend": {"$key": ` + j2dKeyJSON(friend) + `}`,
			fmt.Sprintf(`"Shop": {"$key": {"path": ["Shop", %d]}}`, i%9+1),
			fmt.Sprintf(`"Tags": ["a", %d, null, true]`, i),
			`"Empty": []`,
			fmt.Sprintf(`"Address": {"City": "Town %d", "Zip": %d, "Geo": {"$geo": [1.5, 2.5]}}`, i%17, 10000+i),
			`"Lines": [{"Sku": "a", "Qty": 1}, {"Sku": "b", "Qty": 2}]`,
			fmt.Sprintf(`"Secret": {"$noindex": "hidden %d"}`, i),
			fmt.Sprintf(`"Score": %d.5`, i),
			`"Ratio": 2.0`,
			fmt.Sprintf(`"Count": %d`, i*1000),
			fmt.Sprintf(`"Ok": %t`, i%2 == 1),
			`"Nothing": null`,
		}
		fk := rewrite.DatastoreKey{Path: friend}
		sk := rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Shop", ID: int64(i%9 + 1)}}}
		want := []record.Field{
			{Name: "Name", Value: record.String(fmt.Sprintf("Kunde %d", i))},
			{Name: "Since", Value: record.Time(at)},
			{Name: "Avatar", Value: record.Bytes(blob)},
			{Name: "Home", Value: geo(lat, lng)},
			{Name: "Friend", Value: record.Key(fk)}, // rewritten below
			{Name: "Shop", Value: record.Key(sk)},
			{Name: "Tags", Value: arr(record.String("a"), record.Int(int64(i)), record.Value{}, record.Bool(true))},
			{Name: "Empty", Value: arr()},
			{Name: "Address", Value: entity(
				record.Field{Name: "City", Value: record.String(fmt.Sprintf("Town %d", i%17))},
				record.Field{Name: "Geo", Value: geo(1.5, 2.5)},
				record.Field{Name: "Zip", Value: record.Int(int64(10000 + i))})},
			{Name: "Lines", Value: arr(
				entity(record.Field{Name: "Qty", Value: record.Int(1)}, record.Field{Name: "Sku", Value: record.String("a")}),
				entity(record.Field{Name: "Qty", Value: record.Int(2)}, record.Field{Name: "Sku", Value: record.String("b")}))},
			{Name: "Secret", Value: record.String(fmt.Sprintf("hidden %d", i)), NoIndex: true},
			{Name: "Score", Value: record.Float(float64(i) + 0.5)},
			{Name: "Ratio", Value: record.Float(2)},
			{Name: "Count", Value: record.Int(int64(i * 1000))},
			{Name: "Ok", Value: record.Bool(i%2 == 1)},
			{Name: "Nothing", Value: record.Value{}},
		}
		ents = append(ents, entityLine{path: path, line: `{"__key__": ` + j2dKeyJSON(path) + ", " + strings.Join(props, ", ") + "}", want: want})
		if i%3 == 0 {
			op := append(append([]rewrite.PathElement(nil), path...), rewrite.PathElement{Kind: "Order", ID: int64(100 + i)})
			if i%6 == 0 {
				op[1] = rewrite.PathElement{Kind: "Order", Name: fmt.Sprintf("order-%d", i)}
			}
			ents = append(ents, entityLine{path: op,
				line: fmt.Sprintf(`{"__key__": %s, "Total": %d.75, "PlacedAt": {"$timestamp": %q}}`, j2dKeyJSON(op), i, at.Format(time.RFC3339Nano)),
				want: []record.Field{{Name: "Total", Value: record.Float(float64(i) + 0.75)}, {Name: "PlacedAt", Value: record.Time(at)}}})
		}
	}
	var lines []string
	for _, e := range ents {
		lines = append(lines, e.line)
	}
	lines = append(lines,
		`{"__key__": {"path": ["Customer", "a/b"]}, "Name": "slash"}`,
		`{"__key__": {"path": ["Customer", "dotted"]}, "a.b": 1}`,
	)
	in := writeLines(t, "customers.jsonl", lines)
	n := int64(len(ents))

	rw := datastoreRewriter(t, rewrite.StepConfig{Strategy: "reverse"})

	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dstNS := emulator.UniqueNamespace("j2d-" + runner)
			newKey := func(path []rewrite.PathElement) rewrite.DatastoreKey {
				t.Helper()
				nk, err := rw.Rewrite(rewrite.DatastoreKey{Path: path})
				if err != nil {
					t.Fatalf("rewrite %v: %v", path, err)
				}
				nk.Namespace = dstNS
				return nk
			}
			want := map[string]record.Record{}
			for _, e := range ents {
				nk := newKey(e.path)
				fs := append([]record.Field(nil), e.want...)
				for i := range fs {
					if fs[i].Name == "Friend" {
						fs[i].Value = record.Key(newKey(fs[i].Value.Key.Path))
					}
				}
				want[nk.String()] = record.Record{Key: &nk, Fields: fs}
			}
			if int64(len(want)) != n {
				t.Fatalf("new keys collide: %d for %d entities", len(want), n)
			}
			if _, ok := want[newKey([]rewrite.PathElement{{Kind: "Customer", Name: "21"}}).String()]; !ok {
				t.Fatal("name 21 has no key")
			}
			dir := t.TempDir()
			for run := 1; run <= 2; run++ {
				cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: reverse}
references: [Friend]
dead_letter: %q
`, in, emulator.DatastoreProject(), dstNS, filepath.Join(dir, fmt.Sprintf("dead%d.jsonl", run))))
				start := time.Now()
				res := migrate(t, cfg, runner)
				t.Logf("run %d: %s in %s", run, res.Counters.String(), time.Since(start).Round(time.Millisecond))
				wantCounters(t, res, n+2, n, n, 2)

				dead := readDeadLetters(t, cfg.DeadLetter)
				if len(dead) != 2 {
					t.Fatalf("run %d: %d dead letters, want 2: %+v", run, len(dead), dead)
				}
				for _, d := range dead {
					if d.Stage != record.StageRewrite {
						t.Errorf("run %d: dead letter at stage %q, want %q: %+v", run, d.Stage, record.StageRewrite, d)
					}
					if !strings.Contains(d.Reason, `"/"`) && !strings.Contains(d.Reason, "a.b") {
						t.Errorf("run %d: dead letter reason %q names neither the / nor the property a.b", run, d.Reason)
					}
					if len(d.Record) == 0 {
						t.Errorf("run %d: dead letter without its record: %+v", run, d)
					}
				}

				got := readEntities(t, c, dstNS, "Customer")
				for k, r := range readEntities(t, c, dstNS, "Order") {
					got[k] = r
				}
				checkEntities(t, fmt.Sprintf("run %d", run), got, want)
			}
		})
	}
}
