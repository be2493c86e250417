// Package config is rekey's typed configuration: what to read, how to
// rewrite its keys and where to write it.
//
// A Config comes from a YAML file, REKEY_* environment variables and flags,
// merged by a *viper.Viper the caller owns (see NewViper and Load). Load
// refuses unknown keys; Validate reports every remaining problem at once,
// each prefixed with its path in the file, e.g.
//
//	rewrite.params.n: must be 1..32, got 40
//	target.table: required for a spanner target
//
// LoadFile reports Load's and Validate's problems together. Explain says
// where each value of the effective config came from (the file and line,
// a REKEY_* variable, a flag, a default), for `rekey config show`. The
// reference of every key, docs/config.md, is generated from this package's
// struct tags, doc comments and defaults (go generate; see gendocs).
package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/retry"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/internal/write/throttle"
	"github.com/rekeyio/rekey/internal/write/writeorder"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Endpoint types.
const (
	TypeSpanner   = record.Spanner // the stores' own names
	TypeDatastore = record.Datastore
	TypeJSONL     = "jsonl"
	TypeCSV       = "csv"
	TypeAvro      = "avro"
	// TypeEntityJSON is Datastore entities in files as Google's Dataflow
	// templates ("Datastore to Cloud Storage Text", "Cloud Storage Text to
	// Datastore") write and read them: one Datastore API Entity per line in
	// its proto3 JSON form (see datastoredb.ParseEntityJSON). A source or a
	// target; it holds entities, so its records are Datastore-shaped.
	TypeEntityJSON = "entity-json"
)

// Types lists every endpoint type.
var Types = []string{TypeSpanner, TypeDatastore, TypeJSONL, TypeCSV, TypeAvro, TypeEntityJSON}

// Values of Config.Ancestors.
const (
	AncestorsRoot = "root"
	AncestorsAll  = "all"
)

// Values of WriteConfig.Mode.
const (
	ModeUpsert = storewrite.ModeUpsert
	ModeInsert = storewrite.ModeInsert
)

// Values of WriteConfig.Indexes.
const (
	IndexesAfter  = "after"
	IndexesBefore = "before"
	IndexesNone   = "none"
)

// Values of WriteConfig.Shuffle.
const (
	ShuffleAuto   = "auto"
	ShuffleAlways = "always"
	ShuffleNever  = "never"
)

// Values of RampConfig.Profile.
const (
	RampNone      = throttle.ProfileNone
	RampDatastore = throttle.ProfileDatastore
	RampGCS       = throttle.ProfileGCS
	RampCustom    = throttle.ProfileCustom
)

// Service limits and defaults for write batches.
const (
	// The stores' limits per commit and the default batch bounds are
	// their packages': spannerdb.MaxCommitMutations, MaxCommitBytes and
	// DefaultMaxMutations, DefaultMaxBytes, DefaultMaxRows (Beam's
	// SpannerIO's); datastoredb.MaxCommitEntities, MaxCommitBytes and
	// DefaultMaxBytes (Beam's Datastore connector's: at most 500 entities
	// and about 9 MB a commit).

	// Write planning (internal/write/writeorder): the least number of random
	// shard keys, and how many records a shard sorts at once.
	DefaultWriteShards = writeorder.DefaultShards
	DefaultWriteBuffer = writeorder.DefaultBuffer
	MaxWriteShards     = writeorder.MaxShards
	MaxWriteBuffer     = writeorder.MaxBuffer

	// Commits a worker has in flight at once (Datastore targets).
	DefaultDatastoreParallelism = 8
	MaxWriteParallelism         = 64
)

// Config is one migration.
type Config struct {
	// Source is where rows or entities are read.
	Source Endpoint `mapstructure:"source"`
	// Target is where they are written under their new keys.
	Target Endpoint `mapstructure:"target"`
	// Rewrite is the key rewrite strategy.
	Rewrite RewriteConfig `mapstructure:"rewrite"`
	// Ancestors (Datastore): "root" rewrites only the root element of each
	// key path, so descendants keep their ids under the new root and entity
	// groups stay together; "all" (default) rewrites every element.
	Ancestors string `mapstructure:"ancestors"`
	// References are Datastore property names whose key values point at
	// migrated entities; they are rewritten the same way.
	References []string `mapstructure:"references"`
	// ReferencesTo are Datastore properties whose key values point at a
	// kind migrated in another run, with the rewrite that kind got there.
	ReferencesTo []ReferenceTo `mapstructure:"references_to"`
	// KeepOriginalKey, when set, is the property or column that keeps the
	// old key on each written row or entity.
	KeepOriginalKey string `mapstructure:"keep_original_key"`
	// Interleaved are the child tables interleaved in Source.Table (Spanner
	// to Spanner), migrated with it: their keys start with the parent's,
	// and the parent's part is rewritten the same way.
	Interleaved []string `mapstructure:"interleaved"`
	// Descendants are the kinds of descendant entities of Source.Kind (a
	// Datastore source), migrated with it: their key paths start with
	// their ancestors', rewritten the same way. (`interleaved` was the
	// name of this setting for Datastore sources too, and is still read
	// as it when descendants is not set.)
	Descendants []string `mapstructure:"descendants"`
	// DeadLetter is a path (local or gs://) where refused elements go.
	DeadLetter string `mapstructure:"dead_letter"`
	// Write shapes the writes to the target.
	Write WriteConfig `mapstructure:"write"`
	// Ramp throttles the write rate at the start of a run.
	Ramp RampConfig `mapstructure:"ramp"`
	// Cohort says who each record's user is, for a staged cutover that
	// moves users to the new keys a cohort at a time.
	Cohort CohortConfig `mapstructure:"cohort"`
}

// CohortConfig assigns records to users and users to cohorts (package
// cohort): cohort = MOD(MOD(FARM_FINGERPRINT(user id), Buckets) +
// Buckets, Buckets).
type CohortConfig struct {
	// User is where a record's user id is (cohort.ParseUser): a column or
	// property ("UserId"), the element of a kind in the record's Datastore
	// key ("key:User"), the last element of the key a property holds
	// ("ref:owner") or its element of a kind ("ref:owner:User"). Empty
	// when the migration has no cohorts.
	User string `mapstructure:"user"`
	// Buckets is the number of cohorts, 1..cohort.MaxBuckets (default
	// cohort.DefaultBuckets, 10,000).
	Buckets int `mapstructure:"buckets"`
	// CacheTTL is the longest the application library acts on the phases
	// it read, and Skew the margin for clocks and calls in flight (0: the
	// cutover package's defaults, 30s and 10s). Every application
	// instance and every operator command of the migration must use the
	// same: a cohort is held in dual_write (and read_new) for CacheTTL +
	// Skew before it moves on.
	CacheTTL time.Duration `mapstructure:"cache_ttl"`
	// Skew is the margin for clocks and calls in flight added to
	// CacheTTL (0: the cutover package's default, 10s).
	Skew time.Duration `mapstructure:"skew"`
}

// UserSpec parses User; ok is false when no user is configured.
func (c CohortConfig) UserSpec() (u cohort.User, ok bool, err error) {
	if strings.TrimSpace(c.User) == "" {
		return cohort.User{}, false, nil
	}
	u, err = cohort.ParseUser(c.User)
	return u, err == nil, err
}

// Endpoint is a source or a target.
type Endpoint struct {
	// Type is one of spanner, datastore, jsonl, csv, avro, entity-json.
	// The file types are the format: jsonl is rekey's record JSON Lines
	// (record.ParseJSON), csv a header and rows (a source only), avro
	// Spanner's Avro export (a source reads its Avro files; a target is an
	// export folder, with spanner-export.json and the table manifests, that
	// `gcloud spanner databases import` loads), entity-json Datastore
	// entities as Google's Dataflow templates write them (one Datastore API
	// Entity per line, in its proto3 JSON form).
	Type string `mapstructure:"type"`
	// Project is the Google Cloud project (spanner, datastore). On an
	// entity-json target it is the projectId written in every key (none
	// when empty); on an entity-json source, the project the entities'
	// keys must be in (a line with a key in another is a dead letter).
	Project string `mapstructure:"project"`
	// Instance is the Spanner instance id.
	Instance string `mapstructure:"instance"`
	// Database is the Spanner database id, or the Datastore database id
	// (empty for the default database).
	Database string `mapstructure:"database"`
	// Table is the Spanner table.
	Table string `mapstructure:"table"`
	// Columns is a projection: the columns (or properties, or fields) to
	// carry; empty means all. It must include the key columns.
	Columns []string `mapstructure:"columns"`
	// Filter is a Spanner SQL WHERE condition on a spanner source.
	Filter string `mapstructure:"filter"`
	// Key is the source key schema as Spanner DDL columns, e.g.
	// "LastAccess TIMESTAMP, UserId INT64" (see rewrite.ParseKeySchema).
	// Required on a non-spanner source going to a spanner target; optional
	// on a spanner source, where it lets Validate check the rewrite.
	Key string `mapstructure:"key"`
	// Namespace is the Datastore namespace (empty for the default one).
	Namespace string `mapstructure:"namespace"`
	// Kind is the Datastore kind.
	Kind string `mapstructure:"kind"`
	// Path is a file or prefix, local or gs://bucket/... (jsonl, csv, avro,
	// entity-json); on an avro target, the export's folder.
	Path string `mapstructure:"path"`
	// Delimiter is the csv field delimiter (default ",").
	Delimiter string `mapstructure:"delimiter"`
	// Schema is Spanner DDL in a local file, the output of `gcloud
	// spanner databases ddl describe`. On a spanner source the source
	// tables' schemas come from it instead of the database (for a Dataflow
	// dry run without access to the database). On an avro target fed by
	// another source than spanner it gives the export's table (its
	// CREATE TABLE, with the rewritten primary key, and CREATE INDEX
	// statements).
	Schema string `mapstructure:"schema"`
	// ReadTime is when a datastore or spanner source is read: the whole
	// read, the source's descendant kinds or interleaved child tables
	// included, sees the database as it was at one moment. Empty (the
	// default) is the moment the pipeline is built; an RFC 3339 time (e.g.
	// 2026-12-01T12:00:00Z) reads the database as it was then; none reads
	// without one (Datastore: each query sees the database as it is when
	// it runs; Spanner: each table is read at the moment its read starts).
	// A database keeps old versions for an hour (Spanner: its
	// version_retention_period; Datastore: 7 days at whole minutes with
	// point-in-time recovery): a longer or later read needs more, or none.
	ReadTime string `mapstructure:"read_time"`
}

// ReadTimeNone is Endpoint.ReadTime for a read at no single time.
const ReadTimeNone = "none"

// SourceReadTime is when a datastore or spanner source is read (ok
// false: at no single time): the configured time, or now.
func (c *Config) SourceReadTime(now time.Time) (t time.Time, ok bool, err error) {
	switch rt := strings.TrimSpace(c.Source.ReadTime); rt {
	case ReadTimeNone:
		return time.Time{}, false, nil
	case "":
		return now.UTC().Truncate(time.Microsecond), true, nil
	default:
		t, err := time.Parse(time.RFC3339Nano, rt)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("%q is neither none nor an RFC 3339 time (e.g. 2026-12-01T12:00:00Z)", rt)
		}
		return t.UTC().Truncate(time.Microsecond), true, nil
	}
}

// DescendantKinds are the descendant kinds migrated with a Datastore
// source's kind: Descendants, or Interleaved where a config still uses
// that name for them.
func (c *Config) DescendantKinds() []string {
	if c.Source.Type != TypeDatastore {
		return nil
	}
	if len(c.Descendants) > 0 {
		return c.Descendants
	}
	return c.Interleaved
}

// Deprecations lists the settings written in an older form that still
// works, each with its path and the form to use instead, for the CLI to
// print as warnings.
func (c *Config) Deprecations() []string {
	var out []string
	if c.Source.Type == TypeDatastore && len(c.Descendants) == 0 && len(c.Interleaved) > 0 {
		out = append(out, "interleaved: the descendant kinds of a datastore source now go in descendants (interleaved is read as descendants for now)")
	}
	return out
}

// Name is what the endpoint names inside its store: the table, kind or
// path.
func (e Endpoint) Name() string {
	for _, s := range []string{e.Table, e.Kind, e.Path} {
		if s != "" {
			return s
		}
	}
	return ""
}

// IsFile reports whether the endpoint is a file type (jsonl, csv, avro,
// entity-json).
func (e Endpoint) IsFile() bool {
	switch e.Type {
	case TypeJSONL, TypeCSV, TypeAvro, TypeEntityJSON:
		return true
	}
	return false
}

// ReferenceTo is a property holding keys of Kind, which another run
// migrated: with Rewrite (and Ancestors) given here, or as the config at
// Config says (its rewrite, ancestors, and target kind and namespace).
type ReferenceTo struct {
	// Property is the property holding the keys.
	Property string `mapstructure:"property"`
	// Kind is the kind of the keys it holds (required with rewrite).
	Kind string `mapstructure:"kind"`
	// Rewrite is the rewrite the kind got in its own run.
	Rewrite RewriteConfig `mapstructure:"rewrite"`
	// Ancestors is the ancestors setting of that run (with rewrite).
	Ancestors string `mapstructure:"ancestors"`
	// Config is the config file of that run, instead of rewrite: its
	// rewrite, ancestors and target kind and namespace are used.
	Config string `mapstructure:"config"`
}

// RewriteConfig is a strategy with its parameters, as written in a config.
type RewriteConfig struct {
	// Strategy is the strategy's name (`rekey strategies` lists them).
	Strategy string `mapstructure:"strategy"`
	// Params are the strategy's parameters, by name (docs/strategies.md
	// lists each strategy's).
	Params map[string]any `mapstructure:"params"`
	// Steps are the strategies of a chain, applied in order: each a
	// section with strategy, params (and steps).
	Steps []RewriteConfig `mapstructure:"steps"`
}

// Step converts the section into the form rewrite.New takes.
func (r RewriteConfig) Step() rewrite.StepConfig {
	s := rewrite.StepConfig{Strategy: r.Strategy}
	if r.Params != nil {
		s.Params = make(rewrite.Params, len(r.Params))
		for k, v := range r.Params {
			s.Params[k] = v
		}
	}
	for _, st := range r.Steps {
		s.Steps = append(s.Steps, st.Step())
	}
	return s
}

// WriteConfig shapes writes to the target. Zero batch sizes take the
// target's defaults (see SetDefaults).
type WriteConfig struct {
	// Mode is "upsert" (default: re-runs overwrite their own writes) or
	// "insert" (refuse rows or entities that already exist).
	Mode string `mapstructure:"mode"`
	// BatchMutations caps mutations (Spanner cells, Datastore entities) per commit.
	BatchMutations int `mapstructure:"batch_mutations"`
	// BatchBytes caps the size of a commit.
	BatchBytes int `mapstructure:"batch_bytes"`
	// BatchRows caps rows or entities per commit.
	BatchRows int `mapstructure:"batch_rows"`
	// Shards is the number of random shard keys write planning spreads
	// records over (Spanner and Datastore targets): how many workers can
	// sort and write at once. More are used when the input is larger than
	// Shards × Buffer (every shard fits a buffer), fewer when it is too
	// small to give every shard 16 commits.
	Shards int `mapstructure:"shards"`
	// Buffer is how many records a worker sorts at once before cutting
	// them into key-local commits; it bounds the worker's memory.
	Buffer int `mapstructure:"buffer"`
	// Shuffle says whether write planning shuffles all records across
	// workers before sorting them: "always"; "never" (each worker plans
	// the records it read, as they come); or "auto" (the default): never
	// when the rewrite scatters the keys
	// (rewrite.Scatters: hashprefix, bitreverse and uuid on the leading
	// key part) or the source is JSON Lines (read in interleaved ranges,
	// see source.Files), always otherwise. Skipping the shuffle lets
	// writing start with the first records read instead of after the
	// last.
	Shuffle string `mapstructure:"shuffle"`
	// Indexes says when a Spanner target created with --create-target
	// gets the source's secondary indexes: "after" the load (the
	// default: a bulk load into a table without indexes is faster),
	// "before" it, with the tables, or "none".
	Indexes string `mapstructure:"indexes"`
	// Parallelism bounds the commits a worker process has in flight, all
	// bundles together. Datastore targets: default 8. Spanner targets: 0 (the default) means 1 against the emulator (it
	// runs one read-write transaction at a time and aborts the others)
	// and no cap otherwise (each bundle has up to 4 commits in flight).
	Parallelism int `mapstructure:"parallelism"`
	// Retry is the backoff of commits that fail with a transient error.
	Retry RetryConfig `mapstructure:"retry"`
	// AdaptiveThrottle sheds commits locally while the target refuses
	// many of them.
	AdaptiveThrottle AdaptiveThrottleConfig `mapstructure:"adaptive_throttle"`
}

// RetryConfig is the backoff of commits that fail with a transient error
// (ABORTED, UNAVAILABLE, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED; HTTP 408,
// 429, 5xx): a wait drawn uniformly from [0, b), b starting at
// InitialBackoff and doubling up to MaxBackoff, each attempt given
// CommitDeadline, until MaxCumulativeBackoff has been spent waiting; then
// the bundle fails and the runner retries it. Durations are Go durations
// ("500ms", "15s", "15m").
type RetryConfig struct {
	// InitialBackoff bounds the first wait.
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	// MaxBackoff bounds every wait; the bound doubles up to it.
	MaxBackoff time.Duration `mapstructure:"max_backoff"`
	// CommitDeadline is the time each commit attempt is given.
	CommitDeadline time.Duration `mapstructure:"commit_deadline"`
	// MaxCumulativeBackoff is the most time spent waiting before the
	// bundle fails (and the runner retries it).
	MaxCumulativeBackoff time.Duration `mapstructure:"max_cumulative_backoff"`
}

// Policy is the retry.Policy of c.
func (c RetryConfig) Policy() retry.Policy {
	return retry.Policy{Initial: c.InitialBackoff, Max: c.MaxBackoff, Attempt: c.CommitDeadline, MaxCumulative: c.MaxCumulativeBackoff}
}

// AdaptiveThrottleConfig is the client-side throttle of Google's SRE book:
// over the last Window, a commit is rejected locally (and waits) with
// probability max(0, (requests − K·accepts) / (requests + 1)), where a
// commit failing with a transient error is not accepted.
type AdaptiveThrottleConfig struct {
	// Disabled turns the throttle off.
	Disabled bool `mapstructure:"disabled"`
	// K: commits are shed once the requests exceed K times the accepted
	// ones (at least 1).
	K float64 `mapstructure:"k"`
	// Window is how far back requests and accepts are counted.
	Window time.Duration `mapstructure:"window"`
}

// RampConfig is a ramp-up: the write rate starts at Base operations per
// second and is multiplied by Growth every IntervalSeconds.
//
//	none       no ramp-up (default)
//	datastore  Datastore's 500/50/5 rule: 500/s, ×1.5 every 5 minutes
//	gcs        Cloud Storage's guidance: 1000/s, doubled every 20 minutes
//	custom     Base, Growth and IntervalSeconds as given
//
// The datastore and gcs profiles fill in whichever of the three are unset.
type RampConfig struct {
	// Profile is none, datastore, gcs or custom (see above).
	Profile string `mapstructure:"profile"`
	// Base is the write rate at the start, in operations per second.
	Base float64 `mapstructure:"base"`
	// Growth multiplies the rate every interval (at least 1).
	Growth float64 `mapstructure:"growth"`
	// IntervalSeconds is the time between increases, in seconds.
	IntervalSeconds float64 `mapstructure:"interval_seconds"`
	// Run names the ramp-up so that several jobs writing one target at
	// once (say, one per source namespace or key range) spend one budget:
	// every job naming the same run shares it with the others' processes.
	// Empty (the default): each job's ramp-up is its own. The run's start
	// is kept in the target's lease, so a name used again continues that
	// ramp where it stands; give each migration a new one. Letters,
	// digits, '.', '_' and '-', at most 100.
	Run string `mapstructure:"run"`
}

// SetDefaults normalizes enumerated values to lower case and fills in
// defaults: ancestors "all", write mode "upsert", the target's batch sizes,
// write planning's shards and buffer,
// ramp profile "none" and the named ramp profiles' parameters, csv
// delimiter ",", cohort buckets 10,000. Load calls it; Validate expects it to have run.
func (c *Config) SetDefaults() {
	for _, e := range []*Endpoint{&c.Source, &c.Target} {
		e.Type = lowerTrim(e.Type)
		if e.Type == TypeCSV && e.Delimiter == "" {
			e.Delimiter = ","
		}
	}
	c.Ancestors = orDefault(lowerTrim(c.Ancestors), AncestorsAll)
	c.Write.Mode = orDefault(lowerTrim(c.Write.Mode), ModeUpsert)
	c.Write.Shuffle = orDefault(lowerTrim(c.Write.Shuffle), ShuffleAuto)
	c.Write.Indexes = orDefault(lowerTrim(c.Write.Indexes), IndexesAfter)
	mut, bytes, rows := spannerdb.DefaultMaxMutations, spannerdb.DefaultMaxBytes, spannerdb.DefaultMaxRows
	if c.Target.Type == TypeDatastore {
		mut, bytes, rows = datastoredb.MaxCommitEntities, datastoredb.DefaultMaxBytes, datastoredb.MaxCommitEntities
	}
	if c.Write.BatchMutations == 0 {
		c.Write.BatchMutations = mut
	}
	if c.Write.BatchBytes == 0 {
		c.Write.BatchBytes = bytes
	}
	if c.Write.BatchRows == 0 {
		c.Write.BatchRows = rows
	}
	if c.Write.Parallelism == 0 && c.Target.Type == TypeDatastore {
		c.Write.Parallelism = DefaultDatastoreParallelism
	}
	if c.Write.Shards == 0 {
		c.Write.Shards = DefaultWriteShards
	}
	if c.Write.Buffer == 0 {
		c.Write.Buffer = DefaultWriteBuffer
	}
	r := &c.Write.Retry
	r.InitialBackoff = orDefaultDuration(r.InitialBackoff, retry.DefaultInitial)
	r.MaxBackoff = orDefaultDuration(r.MaxBackoff, retry.DefaultMax)
	r.CommitDeadline = orDefaultDuration(r.CommitDeadline, retry.DefaultAttempt)
	r.MaxCumulativeBackoff = orDefaultDuration(r.MaxCumulativeBackoff, retry.DefaultMaxCumulative)
	if c.Write.AdaptiveThrottle.K == 0 {
		c.Write.AdaptiveThrottle.K = DefaultAdaptiveK
	}
	c.Write.AdaptiveThrottle.Window = orDefaultDuration(c.Write.AdaptiveThrottle.Window, DefaultAdaptiveWindow)
	c.Cohort.User = strings.TrimSpace(c.Cohort.User)
	if c.Cohort.Buckets == 0 {
		c.Cohort.Buckets = cohort.DefaultBuckets
	}
	c.Ramp.Profile = orDefault(lowerTrim(c.Ramp.Profile), RampNone)
	if base, growth, interval, ok := throttle.ProfileDefaults(c.Ramp.Profile); ok {
		if c.Ramp.Base == 0 {
			c.Ramp.Base = base
		}
		if c.Ramp.Growth == 0 {
			c.Ramp.Growth = growth
		}
		if c.Ramp.IntervalSeconds == 0 {
			c.Ramp.IntervalSeconds = interval.Seconds()
		}
	}
}

// Defaults of the adaptive throttle (the SRE book's and Beam Java's).
const (
	DefaultAdaptiveK      = 1.25
	DefaultAdaptiveWindow = 2 * time.Minute
)

func orDefaultDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// SourceKey parses Source.Key into the key schema of the source table
// (named after Source.Table, else Target.Table). ok is false when no key
// is configured.
func (c *Config) SourceKey() (schema rewrite.KeySchema, ok bool, err error) {
	if strings.TrimSpace(c.Source.Key) == "" {
		return rewrite.KeySchema{}, false, nil
	}
	table := c.Source.Table
	if table == "" {
		table = c.Target.Table
	}
	schema, err = rewrite.ParseKeySchema(table, c.Source.Key)
	return schema, true, err
}

func lowerTrim(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
