package config

import "testing"

// TestEntityJSONEndpoints: entity-json is a file type holding Datastore
// entities: path (and optionally project) on either side, Datastore
// rewrites, and no rows into an entity-json target.
func TestEntityJSONEndpoints(t *testing.T) {
	ok := []string{
		`
source: {type: entity-json, path: in.json}
target: {type: entity-json, path: out.json, project: my-project}
rewrite: {strategy: hashprefix}
`, `
source: {type: entity-json, path: gs://b/export/*, project: old-project}
target: {type: datastore, project: p, kind: Customer}
rewrite: {strategy: reverse}
`, `
source: {type: datastore, project: p, kind: Customer}
target: {type: entity-json, path: out.json}
rewrite: {strategy: hashprefix}
`, `
source: {type: jsonl, path: in.jsonl}
target: {type: entity-json, path: out.json}
rewrite: {strategy: hashprefix}
`,
	}
	for _, y := range ok {
		c := mustLoad(t, y)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", y, err)
		}
		for _, e := range []Endpoint{c.Source, c.Target} {
			if e.Type == TypeEntityJSON && !e.IsFile() {
				t.Error("entity-json is not a file type")
			}
		}
	}

	tests := []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "fields of other types, no path",
			yaml: `
source: {type: entity-json, table: T, kind: K, namespace: ns}
target: {type: entity-json, path: out.json}
rewrite: {strategy: hashprefix}
`,
			want: []string{
				`source.table: not used by a entity-json source`,
				`source.kind: not used by a entity-json source`,
				`source.namespace: not used by a entity-json source`,
				`source.path: required for a entity-json source`,
			},
		},
		{
			name: "rows into entities",
			yaml: `
source: {type: csv, path: in.csv, key: "Id STRING(MAX)"}
target: {type: entity-json, path: out.json}
rewrite: {strategy: hashprefix}
`,
			want: []string{
				`target.type: entity-json holds Datastore entities, which a csv source does not give (its records are rows); use a datastore, entity-json or jsonl source`,
				`source.key: used only for rows: with a spanner source or target, or between files`,
			},
		},
		{
			name: "a rewrite Datastore keys cannot take",
			yaml: `
source: {type: entity-json, path: in.json}
target: {type: jsonl, path: out.jsonl}
rewrite: {strategy: shard}
`,
			want: []string{`rewrite.strategy: shard does not support a datastore source...`},
		},
		{
			name: "same file",
			yaml: `
source: {type: entity-json, path: x.json}
target: {type: entity-json, path: x.json}
rewrite: {strategy: hashprefix}
`,
			want: []string{`target.path: is the source path "...`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mustLoad(t, tt.yaml).Validate()
			if err == nil {
				t.Fatal("Validate accepted the config")
			}
			checkProblems(t, err, tt.want)
		})
	}
}
