package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// entityExport is an export as Google's "Datastore to Cloud Storage Text"
// template writes it, with every value type (see internal/store/datastoredb).
const entityExport = "../internal/store/datastoredb/testdata/entityjson/export.json"

// entityJSONInput writes an export in two files, as the template writes
// its shards: the golden export's entities plus n more made with protojson
// (the JSON mapping the templates use), and two lines that are not
// entities. It returns the files' glob and the good lines.
func entityJSONInput(t *testing.T, n int) (glob string, good []string) {
	t.Helper()
	golden, err := os.ReadFile(entityExport)
	if err != nil {
		t.Fatal(err)
	}
	good = strings.Split(strings.TrimSpace(string(golden)), "\n")
	base := time.Date(2024, 1, 31, 12, 0, 0, 0, time.UTC)
	for i := range n {
		e := &datastorepb.Entity{
			Key: &datastorepb.Key{PartitionId: &datastorepb.PartitionId{ProjectId: "my-project"}, Path: []*datastorepb.Key_PathElement{
				{Kind: "Customer", IdType: &datastorepb.Key_PathElement_Name{Name: fmt.Sprintf("c%05d", i)}},
			}},
			Properties: map[string]*datastorepb.Value{
				"n":    {ValueType: &datastorepb.Value_IntegerValue{IntegerValue: int64(i) << 40}},
				"seen": {ValueType: &datastorepb.Value_TimestampValue{TimestampValue: timestamppb.New(base.Add(time.Duration(i) * time.Nanosecond))}},
				"note": {ValueType: &datastorepb.Value_StringValue{StringValue: fmt.Sprintf("note %d", i)}, ExcludeFromIndexes: true},
			},
		}
		b, err := protojson.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, string(b))
	}
	dir := t.TempDir()
	half := len(good) / 2
	files := [][]string{
		append(append([]string(nil), good[:half]...), `{"key": {"path": [{"kind": "Customer", "name": "x"}]}, "properties": {"a": {"integerValue": "one"}}}`),
		append([]string{`{"properties": {}}`}, good[half:]...),
	}
	for i, lines := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("export-%05d-of-00002.json", i)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "export-*"), good
}

// readEntityLines parses a file of entity JSON lines.
func readEntityLines(t *testing.T, path string) []*datastorepb.Entity {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*datastorepb.Entity
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var e datastorepb.Entity
		if err := protojson.Unmarshal(line, &e); err != nil {
			t.Fatalf("%s: %s: %v", path, line, err)
		}
		out = append(out, &e)
	}
	return out
}

// TestEntityJSONToEntityJSON migrates an export in the templates' format
// to the same format with hashprefix, on every local runner: every entity
// arrives once under its rewritten key (the one the run's rewrite gives),
// in the project configured, with its properties unchanged (proto.Equal,
// index flags included); the bad lines are dead letters naming file and
// line.
func TestEntityJSONToEntityJSON(t *testing.T) {
	glob, good := entityJSONInput(t, 400)
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			dir := t.TempDir()
			out, dl := filepath.Join(dir, "out.json"), filepath.Join(dir, "dead.jsonl")
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: entity-json, path: %q}
target: {type: entity-json, path: %q, project: new-project}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, glob, out, dl))
			res := migrate(t, cfg, runner)
			// read counts the two bad lines too: read = written + dead_lettered.
			if res.Counters["read"] != int64(len(good))+2 || res.Counters["written"] != int64(len(good)) || res.Counters["dead_lettered"] != 2 {
				t.Errorf("counters %v; want read=%d written=%d dead_lettered=2", res.Counters, len(good)+2, len(good))
			}
			j, err := migration.Resolve(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			rk, err := j.Spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]*datastorepb.Entity{}
			for _, line := range good {
				rec, err := datastoredb.ParseEntityJSON([]byte(line), "")
				if err != nil {
					t.Fatal(err)
				}
				old := rec.Key.String()
				if err := rk.Rewrite(&rec); err != nil {
					t.Fatal(err)
				}
				if rec.Key.String() == old || rec.Key.Leaf().Kind != rec.Table {
					t.Fatalf("the rewrite left %s as %s", old, rec.Key)
				}
				var e datastorepb.Entity
				if err := protojson.Unmarshal([]byte(line), &e); err != nil {
					t.Fatal(err)
				}
				want[rec.Key.String()] = &e
			}
			got := readEntityLines(t, out)
			if len(got) != len(want) {
				t.Fatalf("wrote %d entities, want %d", len(got), len(want))
			}
			for _, e := range got {
				rec, err := datastoredb.FromProto(e, "new-project")
				if err != nil {
					t.Fatalf("written entity: %v", err)
				}
				w, ok := want[rec.Key.String()]
				if !ok {
					t.Fatalf("unexpected or repeated key %s", rec.Key)
				}
				delete(want, rec.Key.String())
				if p := e.Key.GetPartitionId(); p.GetProjectId() != "new-project" || p.GetNamespaceId() != w.Key.GetPartitionId().GetNamespaceId() || p.GetDatabaseId() != w.Key.GetPartitionId().GetDatabaseId() {
					t.Errorf("%s: partition %v, want new-project with the source's database and namespace", rec.Key, p)
				}
				// The properties, compared as entities without their keys.
				wp, gp := withProject(w, "new-project"), proto.Clone(e).(*datastorepb.Entity)
				wp.Key, gp.Key = nil, nil
				if !proto.Equal(wp, gp) {
					t.Errorf("%s: properties changed:\n got  %v\n want %v", rec.Key, gp, wp)
				}
			}
			dead := readDeadLetters(t, dl)
			if len(dead) != 2 {
				t.Fatalf("dead letters %v, want 2", dead)
			}
			wantDead := map[string]string{
				"export-00000-of-00002.json:" + fmt.Sprint(len(good)/2+1): "not a Datastore entity in JSON",
				"export-00001-of-00002.json:1":                            "entity has no key",
			}
			for _, d := range dead {
				r, ok := wantDead[filepath.Base(d.Source)]
				if d.Stage != record.StageRead || !ok || !strings.Contains(d.Reason, r) || d.Raw == "" {
					t.Errorf("dead letter %+v; want one of %v at the read stage with its line", d, wantDead)
				}
			}
		})
	}
}

// withProject is e with every key's projectId set to project, as a
// target with that project writes it.
func withProject(e *datastorepb.Entity, project string) *datastorepb.Entity {
	e = proto.Clone(e).(*datastorepb.Entity)
	var entity func(*datastorepb.Entity)
	var value func(*datastorepb.Value)
	key := func(k *datastorepb.Key) {
		if k == nil {
			return
		}
		if k.PartitionId == nil {
			k.PartitionId = &datastorepb.PartitionId{}
		}
		k.PartitionId.ProjectId = project
	}
	value = func(v *datastorepb.Value) {
		key(v.GetKeyValue())
		if ev := v.GetEntityValue(); ev != nil {
			entity(ev)
		}
		for _, e := range v.GetArrayValue().GetValues() {
			value(e)
		}
	}
	entity = func(e *datastorepb.Entity) {
		key(e.Key)
		for _, v := range e.Properties {
			value(v)
		}
	}
	entity(e)
	return e
}

// TestEntityJSONToDatastore loads an export in the templates' format
// into the Datastore emulator with reverse, into a namespace of its own,
// and reads every entity back: each under its rewritten key, with the
// file's properties as Datastore stores them (datastoredb's normal form,
// FromEntity(ToEntity(r)): microseconds, NoIndex where the store forces
// it).
func TestEntityJSONToDatastore(t *testing.T) {
	c := emulator.TestDatastore(t)
	glob, good := entityJSONInput(t, 200)
	rw := datastoreRewriter(t, rewrite.StepConfig{Strategy: "reverse"})
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace("ej2d-" + runner)
			want := map[string]record.Record{}
			for _, line := range good {
				rec, err := datastoredb.ParseEntityJSON([]byte(line), "")
				if err != nil {
					t.Fatal(err)
				}
				nk, err := rw.Rewrite(rewrite.DatastoreKey{Path: rec.Key.Path})
				if err != nil {
					t.Fatal(err)
				}
				nk.Namespace = ns
				rec.Key = &nk
				k, props, err := datastoredb.ToEntity(&rec)
				if err != nil {
					t.Fatal(err)
				}
				stored, err := datastoredb.FromEntity(k, props)
				if err != nil {
					t.Fatal(err)
				}
				want[stored.Key.String()] = stored
			}
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: entity-json, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: reverse}
dead_letter: %q
`, glob, emulator.DatastoreProject(), ns, filepath.Join(t.TempDir(), "dead.jsonl")))
			res := migrate(t, cfg, runner)
			n := int64(len(good))
			wantCounters(t, res, n+2, n, n, 2) // the two bad lines are read too
			got := readEntities(t, c, ns, "Customer")
			for k, r := range readEntities(t, c, ns, "Order") {
				got[k] = r
			}
			checkEntities(t, runner, got, want)
		})
	}
}
