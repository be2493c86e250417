// Package demo is `rekey demo`: it shows what the strategies do to the
// bundled sample keys (Keys), then runs three complete migrations of the
// samples on the local emulators — or files to files where none is
// installed — and checks every record arrived exactly once under its new
// key with its values unchanged (Migrate). It goes through the same
// migration.Run as `rekey run`.
//
// The key table's shard row and the access-log migration share one
// rewrite (logsRewrite), so a row shows the same ShardId in both. The
// demo's files (the file migration's input and output, dead letters, the
// plan's report) stay in a folder it names (Options.Out); with
// Options.KeepConfigs it also writes each migration's config, which
// `rekey run -c` runs again.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"cloud.google.com/go/spanner"
	"google.golang.org/api/iterator"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/rekeyio/rekey/configs"
	"github.com/rekeyio/rekey/internal/hotspot"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The demo migration's source schema (Spanner).
var demoSourceDDL = []string{
	`CREATE TABLE UserAccessLogs (
  LastAccess TIMESTAMP NOT NULL,
  UserId STRING(36) NOT NULL,
  Page STRING(MAX),
  Bytes INT64
) PRIMARY KEY (LastAccess, UserId)`,
	`CREATE TABLE Customers (
  CustomerId INT64 NOT NULL,
  Name STRING(MAX),
  Email STRING(MAX),
  Since TIMESTAMP
) PRIMARY KEY (CustomerId)`,
	`CREATE TABLE Orders (
  CustomerId INT64 NOT NULL,
  OrderId INT64 NOT NULL,
  Total FLOAT64,
  Items INT64
) PRIMARY KEY (CustomerId, OrderId),
  INTERLEAVE IN PARENT Customers ON DELETE CASCADE`,
}

const (
	demoProject  = "rekey-demo"
	demoInstance = "rekey"
)

// logsRewriteLabel names logsRewrite in the key table and the headings.
const logsRewriteLabel = "shard n=16 on UserId"

// logsRewrite is the rewrite of the UserAccessLogs migration (Spanner or
// files) and of the key table's shard row, so the table shows the ShardId
// the migration writes: ABS(MOD(FARM_FINGERPRINT(UserId), 16)).
func logsRewrite() config.RewriteConfig {
	return config.RewriteConfig{Strategy: "shard", Params: map[string]any{"n": 16, "mode": "abs", "columns": []any{"UserId"}}}
}

// Options are the settings of Migrate.
type Options struct {
	// Runner is the Beam runner: prism or direct.
	Runner string
	// FilesOnly runs the file-to-file migration, without the emulators.
	FilesOnly bool
	// Out is the folder for the demo's files: the file migration's input
	// and output, dead letters, the plan's report (in plan/). It is
	// created if missing; one holding files the demo did not write is
	// refused. Empty: rekey-demo-files in the temporary directory (or a
	// new folder next to it when that one is not the demo's).
	Out string
	// KeepConfigs, when set, is a folder (the same rules as Out) that
	// receives one config per migration the demo runs; `rekey run -c
	// FILE` runs it again, against the same emulators or files.
	KeepConfigs string
}

// demoEnv is where the demo migrates: the emulators, and its folder.
type demoEnv struct {
	w        io.Writer
	runner   string
	dir      string // the demo's files (Options.Out)
	outGiven bool   // dir is the user's --out
	keepDir  string // Options.KeepConfigs
	kept     []string
	// ownEmulators: the demo started an emulator, which stops with it.
	ownEmulators bool
	filesRun     bool   // the file-to-file migration ran
	srcDB        string // database ids
	dstDB        string
	srcNS        string // Datastore namespaces
	dstNS        string
	failures     int
	// logs is the config of the UserAccessLogs migration, planned at the
	// end (plan).
	logs *config.Config
}

// Migrate runs the demo's migrations, saying on w what it does: start (or
// reuse) the emulators, load the samples, migrate three datasets with
// rewritten keys, check them. Without emulators, or with o.FilesOnly, it
// runs the file-to-file migration instead. It ends saying where its files
// (and kept configs) are. Beam must be initialised.
func Migrate(ctx context.Context, w io.Writer, o Options) error {
	d, err := Prepare(w, o)
	if err != nil {
		return err
	}
	return d.Migrate(ctx)
}

// Demo is a demo whose folders are claimed (Prepare), to run (Migrate).
type Demo struct {
	env       *demoEnv
	filesOnly bool
}

// Prepare claims the demo's folders, refusing one that holds files the
// demo did not write, before anything else is done or printed.
func Prepare(w io.Writer, o Options) (*Demo, error) {
	env, err := newEnv(w, o)
	if err != nil {
		return nil, err
	}
	return &Demo{env: env, filesOnly: o.FilesOnly}, nil
}

// Migrate runs the demo (see Migrate).
func (d *Demo) Migrate(ctx context.Context) error {
	env := d.env
	err := env.migrate(ctx, d.filesOnly)
	env.where()
	if err == nil && env.failures > 0 {
		err = fmt.Errorf("%d demo checks failed", env.failures)
	}
	return err
}

// newEnv claims the demo's folders.
func newEnv(w io.Writer, o Options) (*demoEnv, error) {
	e := &demoEnv{w: w, runner: o.Runner, dir: o.Out, outGiven: o.Out != "", keepDir: o.KeepConfigs}
	if !e.outGiven {
		dir, err := tempDir("rekey-demo-files", markFile)
		if err != nil {
			return nil, err
		}
		e.dir = dir
	}
	if err := claimDir(e.dir, "--out"); err != nil {
		return nil, err
	}
	if e.keepDir != "" {
		if err := claimDir(e.keepDir, "--keep-configs"); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *demoEnv) migrate(ctx context.Context, filesOnly bool) error {
	if filesOnly {
		return e.files(ctx)
	}
	stop, err := e.emulators(ctx)
	if errors.Is(err, emulator.ErrNotInstalled) {
		fmt.Fprintf(e.w, "\n%v\nRunning the file-to-file migration instead.\n", err)
		return e.files(ctx)
	}
	if err != nil {
		return err
	}
	defer stop()
	if err := e.spanner(ctx); err != nil {
		return err
	}
	if err := e.datastore(ctx); err != nil {
		return err
	}
	if err := e.plan(ctx); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if e.failures == 0 {
		fmt.Fprintln(e.w, "\nAll checks passed: every record arrived exactly once under its new key, values unchanged.")
	}
	return nil
}

// where says where the demo's files and kept configs are.
func (e *demoEnv) where() {
	what := "dead letters"
	switch {
	case e.filesRun:
		what = "the file migration's input and output, its dead letters"
	case e.outGiven && e.logs != nil:
		what = "dead letters, the plan's report in plan/"
	}
	fmt.Fprintf(e.w, "\nThe demo's files (%s): %s\n", what, e.dir)
	if len(e.kept) == 0 {
		return
	}
	fmt.Fprintf(e.w, "The configs that run its migrations again, each with `rekey run -c FILE`: %s\n", e.keepDir)
	if e.ownEmulators {
		fmt.Fprintln(e.w, "The emulators the demo started have stopped, and its databases with them: to run these configs, start emulators that outlive the demo (`rekey emulators up`, then the export lines it prints) and run the demo again.")
	}
}

// emulators uses the emulators named in the environment, or starts the
// installed ones.
func (e *demoEnv) emulators(ctx context.Context) (func(), error) {
	e.ownEmulators = os.Getenv(emulator.EnvSpannerHost) == "" || os.Getenv(emulator.EnvDatastoreHost) == ""
	stop, err := emulator.Ensure(ctx, func(format string, args ...any) { fmt.Fprintf(e.w, format+"\n", args...) })
	if err != nil {
		return nil, err
	}
	os.Setenv(emulator.EnvDatastoreProject, demoProject)
	return stop, nil
}

func (e *demoEnv) check(ok bool, format string, args ...any) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
		e.failures++
	}
	fmt.Fprintf(e.w, "  [%s] %s\n", mark, fmt.Sprintf(format, args...))
}

// run runs the migration cfg (keeping its config as name.yaml with
// --keep-configs; what says what it does). It replaces the demo's own
// JSON Lines output of an earlier demo, as `rekey run --overwrite` does.
func (e *demoEnv) run(ctx context.Context, name, what string, cfg *config.Config) (*migration.Result, error) {
	if err := e.keepConfig(name, what, cfg); err != nil {
		return nil, err
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	job, res, err := migration.Run(ctx, cfg, migration.Options{CreateTarget: true, Overwrite: true}, pipeline.Runner{Runner: e.runner})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.w, "  %s in %s\n", res.Counters, res.Elapsed.Round(time.Millisecond))
	if n := res.Counters[migration.DeadLettered]; n > 0 {
		e.check(false, "%d records dead-lettered; the first: %s", n, firstLine(job.DeadLetterPath))
	}
	return res, nil
}

func (e *demoEnv) spanner(ctx context.Context) error {
	e.srcDB, e.dstDB = emulator.UniqueDatabaseID("demo-src"), emulator.UniqueDatabaseID("demo-dst")
	if _, err := emulator.NewSpannerDatabase(ctx, demoProject, demoInstance, e.srcDB, demoSourceDDL); err != nil {
		return err
	}
	if _, err := emulator.NewSpannerDatabase(ctx, demoProject, demoInstance, e.dstDB, nil); err != nil {
		return err
	}
	src, err := spanner.NewClient(ctx, spannerdb.DatabasePath(demoProject, demoInstance, e.srcDB))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := spanner.NewClient(ctx, spannerdb.DatabasePath(demoProject, demoInstance, e.dstDB))
	if err != nil {
		return err
	}
	defer dst.Close()
	logs, customers, orders, err := loadSpannerSamples(ctx, src)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.w, "\nLoaded the samples into Spanner database %s: %d UserAccessLogs rows (keyed by time), %d Customers with %d interleaved Orders (sequential ids).\n", e.srcDB, logs, customers, orders)

	endpoint := func(db, table string) config.Endpoint {
		return config.Endpoint{Type: config.TypeSpanner, Project: demoProject, Instance: demoInstance, Database: db, Table: table}
	}
	what := "Spanner UserAccessLogs -> UserAccessLogs in " + e.dstDB + ", " + logsRewriteLabel
	fmt.Fprintf(e.w, "\n1. %s (a new leading ShardId column):\n", what)
	cfg := &config.Config{Source: endpoint(e.srcDB, "UserAccessLogs"), Target: endpoint(e.dstDB, "UserAccessLogs"),
		Rewrite: logsRewrite(), DeadLetter: filepath.Join(e.dir, "logs-dead.jsonl")}
	if _, err := e.run(ctx, "1-spanner-useraccesslogs", what, cfg); err != nil {
		return fmt.Errorf("UserAccessLogs: %w", err)
	}
	e.logs = cfg
	e.compareSpanner(ctx, src, dst, "UserAccessLogs", "SELECT LastAccess, UserId, Page, Bytes FROM UserAccessLogs ORDER BY LastAccess, UserId",
		"SELECT LastAccess, UserId, Page, Bytes FROM UserAccessLogs ORDER BY LastAccess, UserId",
		"SELECT ShardId, LastAccess, UserId FROM UserAccessLogs ORDER BY LastAccess, UserId")

	what = "Spanner Customers + interleaved Orders -> " + e.dstDB + ", bitreverse on CustomerId"
	fmt.Fprintf(e.w, "\n2. %s (children follow their parent):\n", what)
	cfg = &config.Config{Source: endpoint(e.srcDB, "Customers"), Target: endpoint(e.dstDB, "Customers"),
		Rewrite: config.RewriteConfig{Strategy: "bitreverse"}, Interleaved: []string{"Orders"},
		KeepOriginalKey: "OldCustomerId", DeadLetter: filepath.Join(e.dir, "customers-dead.jsonl")}
	if _, err := e.run(ctx, "2-spanner-customers", what, cfg); err != nil {
		return fmt.Errorf("Customers: %w", err)
	}
	e.compareSpanner(ctx, src, dst, "Customers", "SELECT CustomerId, Name, Email, Since FROM Customers ORDER BY CustomerId",
		"SELECT CAST(OldCustomerId AS INT64), Name, Email, Since FROM Customers ORDER BY CAST(OldCustomerId AS INT64)",
		"SELECT CustomerId FROM Customers ORDER BY CAST(OldCustomerId AS INT64)")
	e.compareSpanner(ctx, src, dst, "Orders", "SELECT BIT_REVERSE(CustomerId, true), OrderId, Total, Items FROM Orders ORDER BY 1, 2",
		"SELECT CustomerId, OrderId, Total, Items FROM Orders ORDER BY 1, 2", "")
	var orphans int64
	err = dst.Single().Query(ctx, spanner.Statement{SQL: "SELECT COUNT(*) FROM Orders o WHERE NOT EXISTS (SELECT 1 FROM Customers c WHERE c.CustomerId = o.CustomerId)"}).Do(func(r *spanner.Row) error { return r.Columns(&orphans) })
	if err != nil {
		return err
	}
	e.check(orphans == 0, "every order sits under its rewritten customer (%d orphans)", orphans)
	return nil
}

// loadSpannerSamples writes the samples into the source database with the
// Spanner writer: the access logs as they are, the Customer entities and
// their Order children as rows (customers first: an order needs its
// parent row).
func loadSpannerSamples(ctx context.Context, c *spanner.Client) (logs, customers, orders int, err error) {
	recs, err := sampleRecords("samples/user_access_logs.jsonl")
	if err != nil {
		return 0, 0, 0, err
	}
	for i := range recs {
		recs[i].Table = "UserAccessLogs"
	}
	ents, err := sampleRecords("samples/customers.jsonl")
	if err != nil {
		return 0, 0, 0, err
	}
	var parents, children []record.Record
	for _, r := range ents {
		var id int64
		fmt.Sscanf(r.Key.Path[0].Name, "Customer%d", &id)
		row := record.Record{Fields: []record.Field{{Name: "CustomerId", Value: record.Int(id)}}}
		if len(r.Key.Path) == 1 {
			row.Table = "Customers"
			for _, name := range []string{"Name", "Email", "Since"} {
				v, _ := r.Get(name)
				row.Fields = append(row.Fields, record.Field{Name: name, Value: v})
			}
			parents = append(parents, row)
			continue
		}
		row.Table = "Orders"
		row.Fields = append(row.Fields, record.Field{Name: "OrderId", Value: record.Int(r.Key.Path[1].ID)})
		for _, name := range []string{"Total", "Items"} {
			v, _ := r.Get(name)
			row.Fields = append(row.Fields, record.Field{Name: name, Value: v})
		}
		children = append(children, row)
	}
	for _, t := range []struct {
		table string
		rows  []record.Record
	}{{"UserAccessLogs", recs}, {"Customers", parents}, {"Orders", children}} {
		w, err := spannerdb.NewWriter(ctx, c, t.table)
		if err != nil {
			return 0, 0, 0, err
		}
		if err := write(w.Write(ctx, t.rows)); err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", t.table, err)
		}
	}
	return len(recs), len(parents), len(children), nil
}

// write is the error of a seeding write: its own, or a refused record's.
func write(out storewrite.Outcome, err error) error {
	if err != nil {
		return err
	}
	if n := len(out.DeadLetters); n > 0 {
		return fmt.Errorf("%d records refused, the first: %s", n, out.DeadLetters[0])
	}
	return nil
}

// sampleRecords reads a bundled sample as records.
func sampleRecords(name string) ([]record.Record, error) { return configs.SampleRecords(name) }

func sampleBytes(name string) ([]byte, error) { return fs.ReadFile(configs.Samples, name) }

// compareSpanner checks that the target holds exactly the source rows
// (srcSQL on the source equals dstSQL on the target, row for row) and
// measures how evenly the new keys (keySQL, in the rows' old order) spread.
func (e *demoEnv) compareSpanner(ctx context.Context, src, dst *spanner.Client, table, srcSQL, dstSQL, keySQL string) {
	a, errA := queryStrings(ctx, src, srcSQL)
	b, errB := queryStrings(ctx, dst, dstSQL)
	if errA != nil || errB != nil {
		e.check(false, "%s: reading back: %v %v", table, errA, errB)
		return
	}
	same := len(a) == len(b)
	for i := 0; same && i < len(a); i++ {
		same = a[i] == b[i]
	}
	e.check(same, "%s: %d source rows, %d target rows, values equal row for row", table, len(a), len(b))
	if keySQL == "" {
		return
	}
	keys, err := queryStrings(ctx, dst, keySQL)
	if err != nil {
		e.check(false, "%s: reading keys: %v", table, err)
		return
	}
	fmt.Fprintf(e.w, "       first new keys: %s\n", strings.Join(keys[:min(3, len(keys))], "  "))
}

// queryStrings returns each row rendered as text.
func queryStrings(ctx context.Context, c *spanner.Client, sql string) ([]string, error) {
	var out []string
	it := c.Single().Query(ctx, spanner.Statement{SQL: sql})
	defer it.Stop()
	for {
		row, err := it.Next()
		if err == iterator.Done {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		parts := make([]string, row.Size())
		for i := range parts {
			var v spanner.GenericColumnValue
			if err := row.Column(i, &v); err != nil {
				return nil, err
			}
			parts[i] = protoText(v.Value)
		}
		out = append(out, "("+strings.Join(parts, ", ")+")")
	}
}

func (e *demoEnv) datastore(ctx context.Context) error {
	e.srcNS, e.dstNS = emulator.UniqueNamespace("demo"), emulator.UniqueNamespace("demo-v2")
	c, err := datastoredb.Client(ctx, demoProject, "")
	if err != nil {
		return err
	}
	defer c.Close()
	recs, err := sampleRecords("samples/customers.jsonl")
	if err != nil {
		return err
	}
	for i := range recs {
		recs[i].Key.Namespace = e.srcNS
	}
	if err := write(datastoredb.NewWriter(c).Write(ctx, recs)); err != nil {
		return err
	}
	fmt.Fprintf(e.w, "\nLoaded %d entities into Datastore namespace %s: Customer1, Customer2, ... with Order children.\n", len(recs), e.srcNS)
	what := "Datastore Customer (with Order children) -> namespace " + e.dstNS + ", hashprefix on the root"
	fmt.Fprintf(e.w, "\n3. %s (entity groups stay together):\n", what)
	ds := func(ns string) config.Endpoint {
		return config.Endpoint{Type: config.TypeDatastore, Project: demoProject, Namespace: ns, Kind: "Customer"}
	}
	cfg := &config.Config{Source: ds(e.srcNS), Target: ds(e.dstNS), Ancestors: config.AncestorsRoot, Descendants: []string{"Order"},
		Rewrite: config.RewriteConfig{Strategy: "hashprefix", Params: map[string]any{"n": 4}}, DeadLetter: filepath.Join(e.dir, "ds-dead.jsonl")}
	if _, err := e.run(ctx, "3-datastore-customer", what, cfg); err != nil {
		return fmt.Errorf("Customer: %w", err)
	}
	st, _ := rewrite.New(rewrite.StepConfig{Strategy: "hashprefix", Params: rewrite.Params{"n": 4, "elements": "root"}})
	rw, _ := st.Datastore()
	got, err := readKind(ctx, c, e.dstNS, "Customer")
	if err != nil {
		return err
	}
	gotOrders, err := readKind(ctx, c, e.dstNS, "Order")
	if err != nil {
		return err
	}
	for k, v := range gotOrders {
		got[k] = v
	}
	matched := 0
	firstMiss := ""
	var oldOrder, newOrder [][]byte
	for _, r := range recs {
		nk, err := rw.Rewrite(*r.Key)
		if err != nil {
			continue
		}
		nk.Namespace = e.dstNS
		g, ok := got[nk.String()]
		if ok && record.FieldsDiff(g.Fields, r.Fields) == "" {
			matched++
		} else if firstMiss == "" {
			firstMiss = fmt.Sprintf("%s: want %s, got %v", nk, record.AppendJSON(nil, &r, false), g)
		}
		oldOrder = append(oldOrder, rewrite.AppendDatastoreKey(nil, *r.Key))
		newOrder = append(newOrder, rewrite.AppendDatastoreKey(nil, nk))
	}
	e.check(matched == len(recs) && len(got) == len(recs), "%d entities, %d in the target, %d under the expected new key with equal properties", len(recs), len(got), matched)
	if firstMiss != "" {
		fmt.Fprintf(e.w, "       first difference: %s\n", firstMiss)
	}
	before, after := hotspot.Measure(oldOrder, hotspot.Options{}), hotspot.Measure(newOrder, hotspot.Options{})
	fmt.Fprintf(e.w, "       written in the old key order, the busiest of 16 key ranges gets %.1fx its fair share with the old keys, %.1fx with the new\n", before.Busiest, after.Busiest)
	return nil
}

// readKind reads every entity of kind in namespace, by key text.
func readKind(ctx context.Context, c *datastore.Client, ns, kind string) (map[string]*record.Record, error) {
	q := datastore.NewQuery(kind).Namespace(ns)
	var props []datastore.PropertyList
	keys, err := c.GetAll(ctx, q, &props)
	if err != nil {
		return nil, err
	}
	out := map[string]*record.Record{}
	for i, k := range keys {
		r, err := datastoredb.FromEntity(k, props[i])
		if err != nil {
			return nil, err
		}
		out[r.Key.String()] = &r
	}
	return out, nil
}

// The file migration's output in the demo's folder, and the name of its
// kept config.
const (
	filesOutput = "user_access_logs_v2.jsonl"
	filesConfig = "files-useraccesslogs"
)

// files runs the file-to-file migration of the bundled logs: a copy of
// the sample in the demo's folder to a file next to it.
func (e *demoEnv) files(ctx context.Context) error {
	e.filesRun = true
	src := filepath.Join(e.dir, "user_access_logs.jsonl")
	data, err := sampleBytes("samples/user_access_logs.jsonl")
	if err != nil {
		return err
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return err
	}
	out := filepath.Join(e.dir, filesOutput)
	what := "JSON Lines UserAccessLogs -> JSON Lines, " + logsRewriteLabel
	fmt.Fprintf(e.w, "\n%s:\n", what)
	cfg := &config.Config{
		Source:     config.Endpoint{Type: config.TypeJSONL, Path: src, Table: "UserAccessLogs", Key: "LastAccess TIMESTAMP, UserId STRING(36)"},
		Target:     config.Endpoint{Type: config.TypeJSONL, Path: out},
		Rewrite:    logsRewrite(),
		DeadLetter: filepath.Join(e.dir, "dead.jsonl"),
	}
	res, err := e.run(ctx, filesConfig, what, cfg)
	if err != nil {
		return err
	}
	lines := strings.Count(string(data), "\n")
	e.check(res.Counters[migration.Written] == int64(lines), "%d records in, %d written to %s", lines, res.Counters[migration.Written], out)
	return nil
}

func firstLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if len(line) > 400 {
		line = line[:400] + "..."
	}
	return line
}

// protoText renders a column value as Spanner sends it: strings (also
// INT64, TIMESTAMP, ...) bare, numbers, booleans, NULL.
func protoText(v *structpb.Value) string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue
	case *structpb.Value_NumberValue:
		return strconv.FormatFloat(k.NumberValue, 'g', -1, 64)
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue)
	case *structpb.Value_NullValue:
		return "NULL"
	case *structpb.Value_ListValue:
		parts := make([]string, len(k.ListValue.Values))
		for i, e := range k.ListValue.Values {
			parts[i] = protoText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return v.String()
}
