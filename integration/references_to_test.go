package integration

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/rewrite"
)

// TestReferencesToAnotherRun copies Invoice entities in a run of their
// own, after Customer entities were migrated with hashprefix by another
// config: each invoice's customer property names that config
// (references_to) and lands pointing at the rewritten customer key; a
// second key-valued property pointing at a Customer, mapped nowhere, is
// left as it was and counted (references_unmapped).
func TestReferencesToAnotherRun(t *testing.T) {
	c := emulator.TestDatastore(t)
	const n = 50
	for _, runner := range runners {
		t.Run(runner, func(t *testing.T) {
			ns := emulator.UniqueNamespace("refs-" + runner)
			dir := t.TempDir()
			customers := writeConfig(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Customer}
rewrite: {strategy: hashprefix}
dead_letter: %q
`, filepath.Join(dir, "customers.jsonl"), emulator.DatastoreProject(), ns, filepath.Join(dir, "c-dead.jsonl")))
			var lines []string
			for i := range n {
				lines = append(lines, fmt.Sprintf(`{"__key__": {"path": ["Invoice", %d], "namespace": %q}, "customer": {"$key": {"path": ["Customer", "Customer%d"], "namespace": %q}}, "previous": {"$key": {"path": ["Customer", "Customer%d"], "namespace": %q}}, "total": %d}`,
					i+1, ns, i%7+1, ns, i%7+1, ns, i))
			}
			in := writeLines(t, "invoices.jsonl", lines)
			cfg := loadYAML(t, fmt.Sprintf(`
source: {type: jsonl, path: %q}
target: {type: datastore, project: %s, namespace: %s, kind: Invoice}
rewrite: {strategy: none}
references_to: [{property: customer, config: %q}]
dead_letter: %q
`, in, emulator.DatastoreProject(), ns, customers, filepath.Join(dir, "i-dead.jsonl")))
			res := migrate(t, cfg, runner)
			if res.Counters["written"] != n || res.Counters["references_unmapped"] != n {
				t.Errorf("counters %s; want written=%d references_unmapped=%d", res.Counters, n, n)
			}
			st, _ := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix"})
			ds, _ := st.Datastore()
			got := readEntities(t, c, ns, "Invoice")
			if len(got) != n {
				t.Fatalf("%d invoices in the target, want %d", len(got), n)
			}
			for key, inv := range got {
				cust, _ := inv.Get("customer")
				prev, _ := inv.Get("previous")
				if cust.Key == nil || prev.Key == nil {
					t.Fatalf("invoice %s: customer %v, previous %v", key, cust, prev)
				}
				want, err := ds.Rewrite(*prev.Key) // previous kept the old key
				if err != nil {
					t.Fatal(err)
				}
				if !cust.Key.Equal(want) {
					t.Errorf("invoice %s: customer %s, want the rewritten %s", key, cust.Key, want)
				}
			}
		})
	}
}
