package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/rewrite"
)

// load reads YAML text through a fresh viper, as the CLI does.
func load(t *testing.T, text string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := NewViper(path)
	if err != nil {
		t.Fatal(err)
	}
	return Load(v)
}

func mustLoad(t *testing.T, text string) *Config {
	t.Helper()
	c, err := load(t, text)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// lines flattens an errors.Join tree into its messages.
func lines(err error) []string {
	var out []string
	for _, e := range leaves(err) {
		if e != nil {
			out = append(out, e.Error())
		}
	}
	return out
}

// checkProblems checks that got holds exactly the wanted messages, in any
// order. A wanted message ending in "..." matches any message it starts.
func checkProblems(t *testing.T, err error, want []string) {
	t.Helper()
	got := lines(err)
	var fieldErrs int
	for _, e := range leaves(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			fieldErrs++
		}
	}
	if fieldErrs != len(got) {
		t.Errorf("%d of %d problems are *FieldError", fieldErrs, len(got))
	}
	unmatched := slices.Clone(got)
	for _, w := range want {
		i := slices.IndexFunc(unmatched, func(g string) bool {
			if p, ok := strings.CutSuffix(w, "..."); ok {
				return strings.HasPrefix(g, p)
			}
			return g == w
		})
		if i < 0 {
			t.Errorf("missing problem:\n  %s", w)
			continue
		}
		unmatched = slices.Delete(unmatched, i, i+1)
	}
	for _, g := range unmatched {
		t.Errorf("unexpected problem:\n  %s", g)
	}
	if t.Failed() {
		t.Logf("all problems:\n  %s", strings.Join(got, "\n  "))
	}
}

func TestExampleConfigs(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example configs found in configs/")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			v, err := NewViper(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Load(v)
			if err != nil {
				t.Fatalf("Load:\n%v", err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate:\n%v", err)
			}
			if c.Rewrite.Strategy == "" {
				t.Error("no rewrite strategy")
			}
		})
	}
}

// spannerPair is a valid spanner-to-spanner config to break in tests.
const spannerPair = `
source:
  type: spanner
  project: rekey-demo
  instance: rekey
  database: demo
  table: UserAccessLogs
  key: LastAccess TIMESTAMP, UserId STRING(MAX)
target:
  type: spanner
  project: rekey-demo
  instance: rekey
  database: demo
  table: UserAccessLogsByUser
`

func TestValidateOK(t *testing.T) {
	tests := map[string]string{
		"swap": spannerPair + `
rewrite: {strategy: swap, params: {order: [UserId]}}
`,
		"shard": spannerPair + `
rewrite: {strategy: shard, params: {n: 16, columns: [UserId], mode: abs}}
`,
		"spanner source without key": `
source: {type: spanner, project: p, instance: rekey, database: demo, table: T}
target: {type: spanner, project: p, instance: rekey, database: demo, table: T2}
rewrite: {strategy: swap, params: {order: [B]}}
`,
		"csv to spanner": `
source: {type: csv, path: gs://bucket/in/*.csv, key: "Id INT64", delimiter: ";"}
target: {type: spanner, project: p, instance: rekey, database: demo, table: T}
rewrite: {strategy: bitreverse}
interleaved: []
`,
		"spanner to avro file": `
source: {type: spanner, project: p, instance: rekey, database: demo, table: T, key: "A STRING(36)"}
target: {type: avro, path: /tmp/out.avro}
rewrite: {strategy: hashprefix}
`,
		"interleaved": spannerPair + `
rewrite: {strategy: shard, params: {n: 4}}
interleaved: [AccessDetails, AccessTags]
keep_original_key: OldKey
ramp: {profile: gcs}
`,
	}
	for name, text := range tests {
		t.Run(name, func(t *testing.T) {
			c := mustLoad(t, text)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate:\n%v", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "many at once",
			yaml: `
source: {type: foo}
target: {type: spanner, project: rekey-demo, instance: rekey, database: demo}
rewrite: {strategy: hashprefix, params: {n: 40}}
ancestors: some
write: {mode: merge, batch_mutations: 100000, batch_bytes: -1}
ramp: {profile: fast}
`,
			want: []string{
				`source.type: must be one of spanner, datastore, jsonl, csv, avro, entity-json, got "foo"`,
				`target.table: required for a spanner target`,
				`rewrite.params.n: must be 1..32, got 40`,
				`ancestors: must be one of root, all, got "some"`,
				`write.mode: must be one of upsert, insert, got "merge"`,
				`write.batch_mutations: must be at most 80000 (Spanner's limit of mutations per commit), got 100000`,
				`write.batch_bytes: must be > 0, got -1`,
				`ramp.profile: must be one of none, datastore, gcs, custom, got "fast"`,
			},
		},
		{
			name: "required fields",
			yaml: `
source: {type: datastore}
target: {type: spanner}
`,
			want: []string{
				`source.project: required for a datastore source`,
				`source.kind: required for a datastore source`,
				`target.project: required for a spanner target`,
				`target.instance: required for a spanner target`,
				`target.database: required for a spanner target`,
				`target.table: required for a spanner target`,
				`source.key: required for a datastore source going to a spanner target: the key columns of each record as Spanner DDL, e.g. "UserId STRING(36), LastAccess TIMESTAMP"`,
				`rewrite.strategy: required: one of bitreverse, bucket, chain, generation, hashprefix, none, reverse, shard, swap, uuid`,
			},
		},
		{
			name: "types missing",
			yaml: `rewrite: {strategy: reverse}`,
			want: []string{
				`source.type: required: one of spanner, datastore, jsonl, csv, avro, entity-json`,
				`target.type: required: one of spanner, datastore, jsonl, csv, avro, entity-json`,
			},
		},
		{
			name: "strategy with bad params that cannot do datastore",
			yaml: `
source: {type: jsonl}
target: {type: datastore, project: rekey-demo, kind: Customer, table: Customers}
rewrite: {strategy: shard, params: {n: 0}}
`,
			want: []string{
				`source.path: required for a jsonl source`,
				`target.table: not used by a datastore target`,
				`rewrite.params.n: must be 1..2147483648, got 0`,
				`rewrite.strategy: shard does not support a datastore target`,
			},
		},
		{
			name: "strategy does not support the target store",
			yaml: `
source: {type: jsonl, path: in.jsonl}
target: {type: datastore, project: rekey-demo, kind: Customer}
rewrite:
  strategy: chain
  steps:
    - {strategy: hashprefix}
    - {strategy: swap, params: {order: [a]}}
    - {strategy: bucket}
`,
			want: []string{
				`rewrite.steps[1].strategy: swap does not support a datastore target (swap: Datastore keys not supported...`,
				`rewrite.steps[2].strategy: bucket does not support a datastore target (bucket: Datastore keys not supported...`,
			},
		},
		{
			name: "jsonl to spanner without a key",
			yaml: `
source: {type: jsonl, path: ./in.jsonl}
target: {type: spanner, project: rekey-demo, instance: rekey, database: demo, table: T}
rewrite: {strategy: shard}
`,
			want: []string{
				`source.key: required for a jsonl source going to a spanner target: the key columns of each record as Spanner DDL, e.g. "UserId STRING(36), LastAccess TIMESTAMP"`,
			},
		},
		{
			name: "chain steps",
			yaml: spannerPair + `
rewrite:
  strategy: chain
  steps:
    - strategy: hashprefix
      params: {bogus: 1, hash: sha1}
    - strategy: generation
      params: {g: 0}
    - strategy: nope
`,
			want: []string{
				`rewrite.steps[0].params.bogus: unknown parameter (known: column, elements, hash, n, sep)`,
				`rewrite.steps[0].params.hash: must be one of md5, farm, got "sha1"`,
				`rewrite.steps[1].params.g: must be 1..4611686018427387904, got 0`,
				`rewrite.steps[2].strategy: unknown strategy "nope"; did you mean none? (known: bitreverse, bucket, chain, generation, hashprefix, none, reverse, shard, swap, uuid)`,
			},
		},
		{
			name: "misspelt strategy",
			yaml: spannerPair + "rewrite: {strategy: hashprefx}\n",
			want: []string{`rewrite.strategy: unknown strategy "hashprefx"; did you mean hashprefix? (known: bitreverse, bucket, chain, generation, hashprefix, none, reverse, shard, swap, uuid)`},
		},
		{
			name: "bad key schema and projection",
			yaml: `
source: {type: csv, path: in.csv, key: "LastAccess TIMESTAMP, UserId STRNG", delimiter: "::"}
target: {type: spanner, project: rekey-demo, instance: Rekey_1, database: d, table: "1T"}
rewrite: {strategy: shard}
`,
			want: []string{
				`source.key: key column "UserId": unknown Spanner type "STRNG" (want one of INT64, STRING, BYTES, TIMESTAMP, DATE, BOOL, FLOAT64, NUMERIC)`,
				`source.delimiter: must be one character other than a quote or a line break, got "::"`,
				`target.instance: must be 2-64 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen, got "Rekey_1"`,
				`target.database: must be 2-30 lowercase letters, digits, underscores or hyphens, starting with a letter and not ending with _ or -, got "d"`,
				`target.table: must be a Spanner table name (a letter, then letters, digits or underscores, optionally schema.Table), got "1T"`,
			},
		},
		{
			name: "rewrite does not fit the key",
			yaml: `
source:
  type: spanner
  project: rekey-demo
  instance: rekey
  database: demo
  table: UserAccessLogs
  key: LastAccess TIMESTAMP, UserId STRING(MAX)
  columns: [UserId, Payload]
target: {type: spanner, project: rekey-demo, instance: rekey, database: demo, table: New}
rewrite: {strategy: swap, params: {order: [Nope]}}
keep_original_key: UserId
`,
			want: []string{
				`source.columns: must include the key column LastAccess (from source.key)`,
				`rewrite: does not apply to source.key "LastAccess TIMESTAMP, UserId STRING(MAX)": swap: table UserAccessLogs has no key column "Nope" (key: PRIMARY KEY (LastAccess, UserId))`,
				`keep_original_key: "UserId" is a key column of the source; choose a new column name`,
			},
		},
		{
			name: "options",
			yaml: `
source: {type: spanner, project: p, instance: rekey, database: demo, table: T, filter: "A > 1"}
target: {type: datastore, project: p, kind: "__T", key: "A INT64", filter: "x", database: ab}
rewrite: {strategy: reverse}
ancestors: ROOT
references: [Parent, "", Parent]
interleaved: [Child]
dead_letter: s3://bucket/dlq
keep_original_key: __old__
write: {batch_rows: 1000, batch_mutations: 600, batch_bytes: 20971520}
`,
			want: []string{
				`target.database: must be empty or (default) for the default database, or 4-63 lowercase letters, digits or hyphens, starting with a letter and ending with a letter or digit, got "ab"`,
				`target.filter: not used by a target`,
				`target.key: not used by a target; the target key is source.key rewritten`,
				`target.kind: kinds starting with __ are reserved by Datastore, got "__T"`,
				`references[1]: must not be empty`,
				`references[2]: "Parent" is listed twice (also references[0])`,
				`interleaved: only for a spanner source with a spanner or avro target (child tables) or a datastore source (descendant kinds)`,
				`dead_letter: unsupported scheme "s3" in "s3://bucket/dlq" (want a local path or gs://bucket/...)`,
				`keep_original_key: property names matching __*__ are reserved by Datastore, got "__old__"`,
				`write.batch_mutations: must be at most 500 (Datastore's limit of entities per commit), got 600`,
				`write.batch_rows: must be at most 500 (Datastore's limit of entities per commit), got 1000`,
				`write.batch_bytes: must be at most 10485760 (10 MiB, Datastore's limit per request), got 20971520`,
			},
		},
		{
			name: "read times",
			yaml: `
source: {type: jsonl, path: in.jsonl, table: T, key: "Id INT64", read_time: "2026-01-01T00:00:00Z"}
target: {type: spanner, project: p, instance: rekey, database: demo, table: T, read_time: none}
rewrite: {strategy: reverse}
`,
			want: []string{
				"source.read_time: not used by a jsonl source",
				"target.read_time: not used by a target",
			},
		},
		{
			name: "datastore read time",
			yaml: `
source: {type: datastore, project: p, kind: K, read_time: yesterday}
target: {type: datastore, project: p, kind: K2}
rewrite: {strategy: hashprefix}
`,
			want: []string{
				`source.read_time: "yesterday" is neither none nor an RFC 3339 time (e.g. 2026-12-01T12:00:00Z)`,
			},
		},
		{
			name: "spanner read time",
			yaml: `
source: {type: spanner, project: p, instance: rekey, database: demo, table: T, read_time: "2026-13-01T00:00:00Z"}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: reverse}
`,
			want: []string{
				`source.read_time: "2026-13-01T00:00:00Z" is neither none nor an RFC 3339 time (e.g. 2026-12-01T12:00:00Z)`,
			},
		},
		{
			name: "datastore read time in the future",
			yaml: `
source: {type: datastore, project: p, kind: K, read_time: "2999-01-01T00:00:00Z"}
target: {type: datastore, project: p, kind: K2}
rewrite: {strategy: hashprefix}
`,
			want: []string{
				"source.read_time: 2999-01-01T00:00:00Z is in the future",
			},
		},
		{
			name: "avro target from a file without a schema",
			yaml: `
source: {type: jsonl, path: in.jsonl, table: T, key: "Id INT64"}
target: {type: avro, path: out/}
rewrite: {strategy: bitreverse}
`,
			want: []string{
				"target.schema: required for an avro target fed by a jsonl source: the DDL of the export's table (CREATE TABLE with the rewritten primary key), as `gcloud spanner databases ddl describe` prints it; from a spanner source rekey derives it",
			},
		},
		{
			name: "avro target from entities, csv target, schemas where unused",
			yaml: `
source: {type: avro, path: in/*.avro, key: "Id INT64", schema: s.sql}
target: {type: csv, path: out.csv, schema: s.sql}
rewrite: {strategy: bitreverse}
`,
			want: []string{
				"source.schema: not used by an avro source: its files carry their schema",
				"target.schema: not used by a csv target",
				"target.type: csv is read, not written; write jsonl, or avro (a Spanner export)",
			},
		},
		{
			name: "avro target holds rows",
			yaml: `
source: {type: datastore, project: p, kind: K}
target: {type: avro, path: out/}
rewrite: {strategy: bitreverse}
`,
			want: []string{
				"target.type: avro is a Spanner export and holds rows, which a datastore source does not give (its records are entities)",
			},
		},
		{
			name: "spanner-only options and same table",
			yaml: `
source: {type: datastore, project: p, kind: K, key: "Id INT64", filter: "x"}
target: {type: spanner, project: p, instance: rekey, database: demo, table: T, kind: K}
rewrite: {strategy: bitreverse}
references: [Parent]
interleaved: [Child, child, K]
keep_original_key: "Old Key"
dead_letter: gs://
`,
			want: []string{
				`source.filter: not used by a datastore source`,
				`target.kind: not used by a spanner target`,
				`references: only for a datastore target, not spanner`,
				`interleaved[2]: "K" is the source kind itself`,
				`interleaved[1]: "child" is listed twice (also interleaved[0])`,
				`keep_original_key: must be a Spanner identifier (a letter, then up to 127 letters, digits or underscores), got "Old Key"`,
				`dead_letter: missing bucket name in "gs://" (want gs://bucket/...)`,
			},
		},
		{
			name: "same place",
			yaml: `
source: {type: spanner, project: p, instance: rekey, database: demo, table: T}
target: {type: spanner, project: p, instance: rekey, database: demo, table: t}
rewrite: {strategy: shard}
`,
			want: []string{
				`target.table: is the source table "t" in the same database; write the rewritten rows to a new table`,
			},
		},
		{
			name: "same kind",
			yaml: `
source: {type: datastore, project: p, kind: K}
target: {type: datastore, project: p, kind: K, database: (default)}
rewrite: {strategy: hashprefix}
`,
			want: []string{
				`target.kind: is the source kind "K" in the same database and namespace; write to another kind, namespace or database`,
			},
		},
		{
			name: "write planning",
			yaml: spannerPair + `
rewrite: {strategy: shard}
write: {shards: -2, buffer: 2000000}
`,
			want: []string{
				`write.shards: must be > 0, got -2`,
				`write.buffer: must be at most 1000000 (a worker holds the whole buffer in memory), got 2000000`,
			},
		},
		{
			name: "write shuffle",
			yaml: spannerPair + `
rewrite: {strategy: shard}
write: {shuffle: sometimes}
`,
			want: []string{`write.shuffle: must be one of auto, always, never, got "sometimes"`},
		},
		{
			name: "write buffer smaller than a commit",
			yaml: spannerPair + `
rewrite: {strategy: shard}
write: {shards: 70000, buffer: 100}
`,
			want: []string{
				`write.shards: must be at most 65536 (more shard keys only add per-element cost), got 70000`,
				`write.buffer: must be at least write.batch_rows (500): a commit's records are sorted together, got 100`,
			},
		},
		{
			name: "ramp custom",
			yaml: spannerPair + `
rewrite: {strategy: shard}
ramp: {profile: custom, growth: 0.5, interval_seconds: -3}
`,
			want: []string{
				`ramp.base: required for the custom profile (writes per second at the start)`,
				`ramp.growth: must be >= 1 (the rate is multiplied by it every interval), got 0.5`,
				`ramp.interval_seconds: must be > 0 (seconds between increases), got -3`,
			},
		},
		{
			name: "ramp none with parameters",
			yaml: spannerPair + `
rewrite: {strategy: shard}
ramp: {base: 100}
`,
			want: []string{
				`ramp.base: set to 100 but ramp.profile is none; choose a profile (datastore, gcs or custom)`,
			},
		},
		{
			name: "ramp run without a ramp",
			yaml: spannerPair + `
rewrite: {strategy: shard}
ramp: {run: nightly-1}
`,
			want: []string{
				`ramp.run: set to "nightly-1" but ramp.profile is none; a shared run needs a ramp-up (datastore, gcs or custom)`,
			},
		},
		{
			name: "ramp run name",
			yaml: spannerPair + `
rewrite: {strategy: shard}
ramp: {profile: datastore, run: "night/1"}
`,
			want: []string{
				`ramp.run: "night/1": use letters, digits, '.', '_' and '-', at most 100`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, tt.yaml)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate accepted the config")
			}
			checkProblems(t, err, tt.want)
		})
	}
}

func TestEnvOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rekey.yaml")
	text := spannerPair + `
rewrite: {strategy: shard, params: {n: 4}}
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REKEY_TARGET_TABLE", "FromEnv")
	t.Setenv("REKEY_SOURCE_COLUMNS", "UserId, LastAccess,Payload")
	t.Setenv("REKEY_WRITE_BATCH_ROWS", "100")
	t.Setenv("REKEY_WRITE_BUFFER", "20000")
	t.Setenv("REKEY_RAMP_PROFILE", "custom")
	t.Setenv("REKEY_RAMP_BASE", "250")
	t.Setenv("REKEY_RAMP_GROWTH", "1.5")
	t.Setenv("REKEY_RAMP_INTERVAL_SECONDS", "60")
	t.Setenv("REKEY_DEAD_LETTER", "gs://dlq/rekey")
	t.Setenv("REKEY_REWRITE_PARAMS_N", "8") // named by the file, so known

	v, err := NewViper(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(v)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got, want := c.Target.Table, "FromEnv"; got != want {
		t.Errorf("target.table = %q, want %q", got, want)
	}
	if got, want := c.Source.Table, "UserAccessLogs"; got != want {
		t.Errorf("source.table = %q, want %q (from the file)", got, want)
	}
	if got, want := c.Source.Columns, []string{"UserId", "LastAccess", "Payload"}; !slices.Equal(got, want) {
		t.Errorf("source.columns = %q, want %q", got, want)
	}
	if got, want := c.Write.BatchRows, 100; got != want {
		t.Errorf("write.batch_rows = %d, want %d", got, want)
	}
	if got, want := c.Write.Buffer, 20000; got != want {
		t.Errorf("write.buffer = %d, want %d", got, want)
	}
	if got, want := c.Ramp, (RampConfig{Profile: "custom", Base: 250, Growth: 1.5, IntervalSeconds: 60}); got != want {
		t.Errorf("ramp = %+v, want %+v", got, want)
	}
	if got, want := c.DeadLetter, "gs://dlq/rekey"; got != want {
		t.Errorf("dead_letter = %q, want %q", got, want)
	}
	s, err := rewrite.New(c.Rewrite.Step())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Spec().Params["n"], "8"; got != want {
		t.Errorf("rewrite.params.n = %q, want %q", got, want)
	}

	// Without a file, everything can come from the environment.
	t.Setenv("REKEY_SOURCE_TYPE", "jsonl")
	t.Setenv("REKEY_SOURCE_PATH", "in.jsonl")
	t.Setenv("REKEY_SOURCE_KEY", "Id INT64")
	t.Setenv("REKEY_SOURCE_COLUMNS", "")
	t.Setenv("REKEY_TARGET_TYPE", "spanner")
	t.Setenv("REKEY_TARGET_PROJECT", "rekey-demo")
	t.Setenv("REKEY_TARGET_INSTANCE", "rekey")
	t.Setenv("REKEY_TARGET_DATABASE", "demo")
	t.Setenv("REKEY_REWRITE_STRATEGY", "bitreverse")
	t.Setenv("REKEY_REWRITE_PARAMS_N", "") // no file names rewrite.params.n now
	v, err = NewViper("")
	if err != nil {
		t.Fatal(err)
	}
	c, err = Load(v)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.Source.Type != "jsonl" || c.Target.Table != "FromEnv" || c.Rewrite.Strategy != "bitreverse" {
		t.Errorf("config from the environment = %+v", c)
	}
}

func TestLoadKeepsCallerSettings(t *testing.T) {
	v := viper.New() // a caller's own instance, no environment
	v.SetDefault("write.mode", "insert")
	v.Set("target.table", "Set")
	c, err := Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Write.Mode != "insert" || c.Target.Table != "Set" {
		t.Errorf("write.mode = %q, target.table = %q; want the caller's insert, Set", c.Write.Mode, c.Target.Table)
	}
	if keys := viper.AllKeys(); len(keys) != 0 {
		t.Errorf("the global viper has keys %q", keys)
	}
}

func TestUnknownKeys(t *testing.T) {
	_, err := load(t, spannerPair+`
  tabel: oops
rewrite:
  strategy: chain
  params: {anything: goes}
  steps:
    - {strategy: hashprefix, param: {n: 4}}
write: {batch_row: 10, batch_bytes: lots}
bogus: 1
`)
	if err == nil {
		t.Fatal("Load accepted unknown keys")
	}
	checkProblems(t, err, []string{
		`bogus: unknown key (known: source, target, rewrite, ancestors, references, references_to, keep_original_key, interleaved, descendants, dead_letter, write, ramp, cohort)`,
		`target.tabel: unknown key (did you mean "table"?) (known: type, project, instance, database, table, columns, filter, key, namespace, kind, path, delimiter, schema, read_time)`,
		`rewrite.steps[0].param: unknown key (did you mean "params"?) (known: strategy, params, steps)`,
		`write.batch_row: unknown key (did you mean "batch_rows"?) (known: mode, batch_mutations, batch_bytes, batch_rows, shards, buffer, shuffle, indexes, parallelism, retry, adaptive_throttle)`,
		`write.batch_bytes: must be an integer, got "lots"`,
	})

	// rewrite.params is free-form for Load; rewrite.New checks it.
	c := mustLoad(t, spannerPair+`
rewrite: {strategy: shard, params: {anything: goes}}
`)
	checkProblems(t, c.Validate(), []string{
		`rewrite.params.anything: unknown parameter (known: columns, mode, n, name, sep)`,
	})
}

func TestDefaults(t *testing.T) {
	c := mustLoad(t, `
source: {type: CSV, path: /data/in.csv, key: "Id STRING(MAX)"}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: hashprefix}
ramp: {profile: Datastore, base: 100}
`)
	want := Config{
		Source:    Endpoint{Type: "csv", Path: "/data/in.csv", Key: "Id STRING(MAX)", Delimiter: ","},
		Target:    Endpoint{Type: "datastore", Project: "p", Kind: "K"},
		Rewrite:   RewriteConfig{Strategy: "hashprefix"},
		Ancestors: "all",
		Write:     WriteConfig{Mode: "upsert", BatchMutations: 500, BatchBytes: 9_000_000, BatchRows: 500, Shards: 16, Buffer: 10_000, Shuffle: "auto", Indexes: "after", Parallelism: 8, Retry: defaultRetry, AdaptiveThrottle: defaultAdaptive},
		Ramp:      RampConfig{Profile: "datastore", Base: 100, Growth: 1.5, IntervalSeconds: 300},
		Cohort:    CohortConfig{Buckets: 10_000},
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("got  %+v\nwant %+v", *c, want)
	}
	// source.key with neither side on Spanner is refused.
	checkProblems(t, c.Validate(), []string{`source.key: used only for rows: with a spanner source or target, or between files`})

	c = mustLoad(t, spannerPair+`rewrite: {strategy: swap}`)
	if got, want := c.Write, (WriteConfig{Mode: "upsert", BatchMutations: 5000, BatchBytes: 1 << 20, BatchRows: 500, Shards: 16, Buffer: 10_000, Shuffle: "auto", Indexes: "after", Retry: defaultRetry, AdaptiveThrottle: defaultAdaptive}); got != want {
		t.Errorf("spanner write defaults = %+v, want %+v", got, want)
	}
}

var (
	defaultRetry    = RetryConfig{InitialBackoff: time.Second, MaxBackoff: time.Minute, CommitDeadline: 15 * time.Second, MaxCumulativeBackoff: 15 * time.Minute}
	defaultAdaptive = AdaptiveThrottleConfig{K: 1.25, Window: 2 * time.Minute}
)

func TestRetryAndAdaptiveThrottle(t *testing.T) {
	c := mustLoad(t, spannerPair+`rewrite: {strategy: shard, params: {n: 8}}
write:
  retry: {initial_backoff: 50ms, max_backoff: 2s, commit_deadline: 5s, max_cumulative_backoff: 1m}
  adaptive_throttle: {k: 2, window: 30s}
`)
	want := RetryConfig{InitialBackoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second, CommitDeadline: 5 * time.Second, MaxCumulativeBackoff: time.Minute}
	if c.Write.Retry != want {
		t.Errorf("retry = %+v, want %+v", c.Write.Retry, want)
	}
	if p := c.Write.Retry.Policy(); p.Initial != want.InitialBackoff || p.Max != want.MaxBackoff || p.Attempt != want.CommitDeadline || p.MaxCumulative != want.MaxCumulativeBackoff {
		t.Errorf("policy = %+v, want the configured durations", p)
	}
	if a := c.Write.AdaptiveThrottle; a != (AdaptiveThrottleConfig{K: 2, Window: 30 * time.Second}) {
		t.Errorf("adaptive_throttle = %+v", a)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("valid config refused: %v", err)
	}

	c = mustLoad(t, spannerPair+`rewrite: {strategy: shard, params: {n: 8}}
write:
  retry: {initial_backoff: 2m, max_backoff: 1m, commit_deadline: -1s}
  adaptive_throttle: {k: 0.5, window: 10ms}
  parallelism: 65
`)
	checkProblems(t, c.Validate(), []string{
		`write.parallelism: must be at most 64 (commits in flight per worker), got 65`,
		`write.retry.commit_deadline: must be a positive duration, got -1s`,
		`write.retry.initial_backoff: must be at most write.retry.max_backoff (1m0s), got 2m0s`,
		`write.adaptive_throttle.k: must be at least 1 (at 1 the throttle sheds as soon as anything fails; the default is 1.25), got 0.5`,
		`write.adaptive_throttle.window: must be at least 1s, got 10ms`,
	})
	if _, err := load(t, spannerPair+"rewrite: {strategy: shard, params: {n: 8}}\nwrite: {retry: {initial_backoff: soon}}\n"); err == nil || !strings.Contains(err.Error(), "write.retry.initial_backoff") {
		t.Errorf("a bad duration: %v, want an error naming write.retry.initial_backoff", err)
	}
}

func TestStep(t *testing.T) {
	r := RewriteConfig{
		Strategy: "chain",
		Steps: []RewriteConfig{
			{Strategy: "hashprefix", Params: map[string]any{"n": 4}},
			{Strategy: "generation", Params: map[string]any{"g": 3, "as": "prefix"}},
		},
	}
	want := rewrite.StepConfig{
		Strategy: "chain",
		Steps: []rewrite.StepConfig{
			{Strategy: "hashprefix", Params: rewrite.Params{"n": 4}},
			{Strategy: "generation", Params: rewrite.Params{"g": 3, "as": "prefix"}},
		},
	}
	if got := r.Step(); !reflect.DeepEqual(got, want) {
		t.Errorf("Step() = %+v, want %+v", got, want)
	}
	s, err := rewrite.New(r.Step())
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.Datastore()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ds.Rewrite(rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: "Customer", Name: "Customer1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if name := k.Leaf().Name; !strings.HasPrefix(name, "3-") || !strings.HasSuffix(name, "-Customer1") || len(name) != len("3-a1b2-Customer1") {
		t.Errorf("rewritten name = %q, want the form 3-a1b2-Customer1", name)
	}
}

func TestNewViperMissingFile(t *testing.T) {
	if _, err := NewViper(filepath.Join(t.TempDir(), "nope.yaml")); err == nil {
		t.Error("NewViper accepted a missing file")
	}
}

// Relative paths in a config file are the config file's folder's, not
// the working directory's.
func TestRelativePathsResolveAgainstTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rekey.yaml")
	yaml := `
source: {type: jsonl, path: data/in.jsonl}
target: {type: jsonl, path: gs://b/out.jsonl}
rewrite: {strategy: hashprefix}
dead_letter: ../dead.jsonl
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	v, err := NewViper(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Load(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "data", "in.jsonl"); c.Source.Path != want {
		t.Errorf("source.path %q, want %q", c.Source.Path, want)
	}
	if want := filepath.Join(filepath.Dir(dir), "dead.jsonl"); c.DeadLetter != want {
		t.Errorf("dead_letter %q, want %q", c.DeadLetter, want)
	}
	if c.Target.Path != "gs://b/out.jsonl" {
		t.Errorf("target.path %q changed", c.Target.Path)
	}
}

func TestCohortConfig(t *testing.T) {
	datastorePair := `
source: {type: datastore, project: p, kind: Order}
target: {type: datastore, project: p, kind: Order, namespace: v2}
rewrite: {strategy: hashprefix}
`
	for _, tc := range []struct {
		name, yaml string
		want       CohortConfig
		spec       cohort.User
	}{
		{"column", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: UserId}\n",
			CohortConfig{User: "UserId", Buckets: 10_000}, cohort.User{From: cohort.FromField, Name: "UserId"}},
		{"buckets", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: ' UserId ', buckets: 1000000}\n",
			CohortConfig{User: "UserId", Buckets: 1_000_000}, cohort.User{From: cohort.FromField, Name: "UserId"}},
		{"key element", datastorePair + "cohort: {user: 'key:User', buckets: 1}\n",
			CohortConfig{User: "key:User", Buckets: 1}, cohort.User{From: cohort.FromKey, Kind: "User"}},
		{"reference", datastorePair + "cohort: {user: 'ref:owner'}\n",
			CohortConfig{User: "ref:owner", Buckets: 10_000}, cohort.User{From: cohort.FromRef, Name: "owner"}},
		{"reference element", datastorePair + "cohort: {user: 'ref:owner:User', buckets: 100}\n",
			CohortConfig{User: "ref:owner:User", Buckets: 100}, cohort.User{From: cohort.FromRef, Name: "owner", Kind: "User"}},
		{"jsonl records may be entities", `
source: {type: jsonl, path: in.jsonl}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: hashprefix}
cohort: {user: 'key:User'}
`, CohortConfig{User: "key:User", Buckets: 10_000}, cohort.User{From: cohort.FromKey, Kind: "User"}},
		{"buckets without a user", spannerPair + "rewrite: {strategy: shard}\ncohort: {buckets: 7}\n",
			CohortConfig{Buckets: 7}, cohort.User{}},
		{"no cohort section", spannerPair + "rewrite: {strategy: shard}\n",
			CohortConfig{Buckets: 10_000}, cohort.User{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, tc.yaml)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate:\n%v", err)
			}
			if c.Cohort != tc.want {
				t.Errorf("cohort = %+v, want %+v", c.Cohort, tc.want)
			}
			u, ok, err := c.Cohort.UserSpec()
			if err != nil || ok != (tc.want.User != "") || u != tc.spec {
				t.Errorf("UserSpec() = %+v, %t, %v; want %+v", u, ok, err, tc.spec)
			}
		})
	}

	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"buckets too many", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: UserId, buckets: 1000001}\n",
			[]string{`cohort.buckets: must be 1..1000000, got 1000001`}},
		{"buckets negative", spannerPair + "rewrite: {strategy: shard}\ncohort: {buckets: -1}\n",
			[]string{`cohort.buckets: must be 1..1000000, got -1`}},
		{"bad spec", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: 'key:'}\n",
			[]string{`cohort.user: "key:": key: needs the kind of the key element, e.g. key:User (want COLUMN, key:KIND, ref:PROPERTY or ref:PROPERTY:KIND)`}},
		{"unknown form", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: 'col:UserId', buckets: 0}\n",
			[]string{`cohort.user: "col:UserId": unknown form "col:" (want COLUMN, key:KIND, ref:PROPERTY or ref:PROPERTY:KIND)`}},
		{"key of a spanner row", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: 'key:User'}\n",
			[]string{`cohort.user: key:User reads a Datastore key, which the rows of a spanner source do not have; name the column that holds the user id`}},
		{"reference in a csv row", `
source: {type: csv, path: in.csv, key: "Id INT64"}
target: {type: spanner, project: p, instance: rekey, database: demo, table: T}
rewrite: {strategy: bitreverse}
cohort: {user: 'ref:owner:User'}
`, []string{`cohort.user: ref:owner:User reads a Datastore key, which the rows of a csv source do not have; name the column that holds the user id`}},
		{"not a spanner column name", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: 'User Id'}\n",
			[]string{`cohort.user: must be a Spanner identifier (a letter, then up to 127 letters, digits or underscores), got "User Id"`}},
		{"a key column of the wrong type", spannerPair + "rewrite: {strategy: shard}\ncohort: {user: lastaccess}\n",
			[]string{`cohort.user: lastaccess is a TIMESTAMP key column (source.key); a user id must be STRING, INT64 or BYTES`}},
		{"projected away", `
source: {type: spanner, project: p, instance: rekey, database: demo, table: T, columns: [LastAccess, UserId, Page]}
target: {type: spanner, project: p, instance: rekey, database: demo, table: T2}
rewrite: {strategy: shard}
cohort: {user: Owner}
`,
			[]string{`cohort.user: Owner is not among source.columns, so the records would not have it`}},
		{"reference projected away", `
source: {type: datastore, project: p, kind: Order, columns: [total]}
target: {type: datastore, project: p, kind: Order2}
rewrite: {strategy: hashprefix}
cohort: {user: 'ref:owner'}
`, []string{`cohort.user: owner is not among source.columns, so the records would not have it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustLoad(t, tc.yaml)
			checkProblems(t, c.Validate(), tc.want)
		})
	}

	if _, err := load(t, datastorePair+"cohort: {user: x, bucket: 5}\n"); err == nil || !strings.Contains(err.Error(), `cohort.bucket: unknown key (did you mean "buckets"?) (known: user, buckets, cache_ttl, skew)`) {
		t.Errorf("an unknown cohort key: %v", err)
	}
	if c, err := load(t, datastorePair+"cohort: {user: x, cache_ttl: 5s, skew: 2s}\n"); err != nil || c.Cohort.CacheTTL != 5*time.Second || c.Cohort.Skew != 2*time.Second {
		t.Errorf("cohort cache_ttl and skew: %+v, %v", c, err)
	}
	if c := mustLoad(t, datastorePair+"cohort: {user: x, skew: -1s}\n"); c.Validate() == nil || !strings.Contains(c.Validate().Error(), "cohort.skew") {
		t.Errorf("a negative skew: %v", c.Validate())
	}
	if _, err := load(t, datastorePair+"cohort: {buckets: many}\n"); err == nil || !strings.Contains(err.Error(), `cohort.buckets: must be an integer, got "many"`) {
		t.Errorf("buckets not a number: %v", err)
	}

	// From the environment, like every key.
	t.Setenv("REKEY_COHORT_USER", "key:Account")
	t.Setenv("REKEY_COHORT_BUCKETS", "500")
	c := mustLoad(t, datastorePair)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Cohort != (CohortConfig{User: "key:Account", Buckets: 500}) {
		t.Errorf("cohort from the environment = %+v", c.Cohort)
	}
}

// A rewrite naming a key column the key does not have is refused by
// Validate, as by run, with the table named: also between files (whose
// rows are keyed by source.key) and for a Spanner source whose key comes
// from its source.schema DDL file.
func TestValidateChecksTheRewriteAgainstTheKey(t *testing.T) {
	ddl := filepath.Join(t.TempDir(), "s.sql")
	if err := os.WriteFile(ddl, []byte("CREATE TABLE UserAccessLogs (LastAccess TIMESTAMP NOT NULL, UserId STRING(36) NOT NULL, Page STRING(MAX)) PRIMARY KEY (LastAccess, UserId)"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"files", `
source: {type: jsonl, path: ./data/user_access_logs.jsonl, key: "LastAccess TIMESTAMP, UserId STRING(36)"}
target: {type: jsonl, path: ./out.jsonl}
rewrite: {strategy: shard, params: {n: 10, columns: [UsrId]}}
`, `rewrite: does not apply to source.key "LastAccess TIMESTAMP, UserId STRING(36)": shard: table user_access_logs has no key column "UsrId" (key: PRIMARY KEY (LastAccess, UserId))`},
		{"files with a table", `
source: {type: jsonl, path: ./in.jsonl, table: Logs, key: "LastAccess TIMESTAMP, UserId STRING(36)"}
target: {type: jsonl, path: ./out.jsonl}
rewrite: {strategy: swap, params: {order: [UsrId]}}
`, `rewrite: does not apply to source.key "LastAccess TIMESTAMP, UserId STRING(36)": swap: table Logs has no key column "UsrId" (key: PRIMARY KEY (LastAccess, UserId))`},
		{"spanner source.schema", `
source: {type: spanner, project: p, instance: inst, database: db, table: UserAccessLogs, schema: ` + ddl + `}
target: {type: spanner, project: p, instance: inst, database: db, table: New}
rewrite: {strategy: shard, params: {n: 10, columns: [UsrId]}}
`, `rewrite: does not apply to the key of table UserAccessLogs in source.schema ` + ddl + `: shard: table UserAccessLogs has no key column "UsrId" (key: PRIMARY KEY (LastAccess, UserId))`},
		{"spanner source.schema without the table", `
source: {type: spanner, project: p, instance: inst, database: db, table: Nope, schema: ` + ddl + `}
target: {type: spanner, project: p, instance: inst, database: db, table: New}
rewrite: {strategy: shard, params: {n: 10, columns: [UserId]}}
`, `source.table: table Nope is not in source.schema ` + ddl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkProblems(t, mustLoad(t, tc.yaml).Validate(), []string{tc.want})
		})
	}
	ok := mustLoad(t, `
source: {type: spanner, project: p, instance: inst, database: db, table: UserAccessLogs, schema: `+ddl+`}
target: {type: spanner, project: p, instance: inst, database: db, table: New}
rewrite: {strategy: shard, params: {n: 10, columns: [UserId]}}
`)
	if err := ok.Validate(); err != nil {
		t.Errorf("a rewrite that fits the DDL's key: %v", err)
	}
}

// A YAML syntax error names the line of the problem: the YAML library
// counts its parser's lines from 0.
func TestYAMLSyntaxErrorLine(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"source:\n  type: spanner\n table: A\n", "yaml: line 3: did not find expected key"},
		{"source:\n  type: spanner\ntarget:\n  columns: [A\n  type: spanner\n", "yaml: line 4: did not find expected ',' or ']'"},
		{"a: 1\nb: \"x\nc: 2\n", "yaml: line 2: found unexpected end of stream"},
	} {
		f := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadFile(f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}
