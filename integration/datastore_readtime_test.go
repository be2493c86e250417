package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/pipeline"
)

// TestDatastoreReadTime reads a kind at one read time, as a Spanner
// source reads at one timestamp: entities are written, the time T is
// taken, then one is updated, one deleted and one created; a migration
// with source.read_time: T migrates exactly the kind as it was at T
// (the Firestore emulator honours a query's read time), with its
// descendant kind at the same T; source.read_time: none migrates it as it
// is; the default reads at the moment the job is resolved and says so.
func TestDatastoreReadTime(t *testing.T) {
	emulator.RequireDatastore(t)
	ctx := context.Background()
	ns := emulator.UniqueNamespace(t.Name())
	c, err := datastoredb.Client(ctx, emulator.DatastoreProject(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := func(name string) *datastore.Key {
		k := datastore.NameKey("Account", name, nil)
		k.Namespace = ns
		return k
	}
	child := func(parent, name string) *datastore.Key {
		k := datastore.NameKey("Entry", name, key(parent))
		k.Namespace = ns
		return k
	}
	put := func(k *datastore.Key, v string) {
		t.Helper()
		if _, err := c.Put(ctx, k, &datastore.PropertyList{{Name: "V", Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		put(key(fmt.Sprintf("a%02d", i)), "before")
	}
	put(child("a00", "e1"), "before")
	time.Sleep(50 * time.Millisecond)
	at := time.Now().UTC().Truncate(time.Microsecond)
	time.Sleep(50 * time.Millisecond)
	put(key("a01"), "after")
	if err := c.Delete(ctx, key("a02")); err != nil {
		t.Fatal(err)
	}
	put(key("a99"), "after")
	put(child("a00", "e2"), "after")

	run := func(readTime string) (*runNotes, []string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out.jsonl")
		yaml := fmt.Sprintf(`
source: {type: datastore, project: %s, namespace: %s, kind: Account%s}
target: {type: jsonl, path: %q}
descendants: [Entry]
rewrite: {strategy: hashprefix}
dead_letter: %q
`, emulator.DatastoreProject(), ns, readTime, out, filepath.Join(t.TempDir(), "dead.jsonl"))
		printed := &runNotes{}
		if _, _, err := migration.Run(ctx, loadYAML(t, yaml), migration.Options{Notes: printed.Say}, pipeline.Runner{Runner: "prism"}); err != nil {
			t.Fatalf("read_time %q: %v", readTime, err)
		}
		var got []string
		for _, r := range readJSONL(t, out) {
			v, _ := r.Get("V")
			last := r.Key.Path[len(r.Key.Path)-1]
			_, name, _ := strings.Cut(last.Name, "-") // hashprefix's "a1b2-"
			got = append(got, last.Kind+":"+name+"="+v.Str)
		}
		sort.Strings(got)
		return printed, got
	}
	want := func(changed bool) []string {
		var w []string
		for i := range 20 {
			name := fmt.Sprintf("a%02d", i)
			switch {
			case changed && name == "a01":
				w = append(w, "Account:a01=after")
			case changed && name == "a02":
			default:
				w = append(w, "Account:"+name+"=before")
			}
		}
		w = append(w, "Entry:e1=before")
		if changed {
			w = append(w, "Account:a99=after", "Entry:e2=after")
		}
		sort.Strings(w)
		return w
	}
	printed, got := run(fmt.Sprintf(", read_time: %q", at.Format(time.RFC3339Nano)))
	if strings.Join(got, " ") != strings.Join(want(false), " ") {
		t.Errorf("at read time %s:\n got %v\nwant %v", at.Format(time.RFC3339Nano), got, want(false))
	}
	if ats := printed.readingAt(); len(ats) != 1 || !ats[0].Equal(at) {
		t.Errorf("the run does not say its read time %s:\n%s", at.Format(time.RFC3339Nano), printed)
	}
	if _, got := run(", read_time: none"); strings.Join(got, " ") != strings.Join(want(true), " ") {
		t.Errorf("read_time none:\n got %v\nwant %v", got, want(true))
	}
	printed, got = run("")
	if strings.Join(got, " ") != strings.Join(want(true), " ") || len(printed.readingAt()) != 1 {
		t.Errorf("default read time:\n got %v\nwant %v\n%s", got, want(true), printed)
	}
}
