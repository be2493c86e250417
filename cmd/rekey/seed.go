package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/rekeyio/rekey/configs"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/write/storewrite"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// The bundled samples (configs.Samples) that `emulators up --seed` loads.
const (
	logsSample      = "samples/user_access_logs.jsonl"
	customersSample = "samples/customers.jsonl"
)

// logsSampleDDL creates a Spanner source table for the access-log sample,
// named %s.
const logsSampleDDL = `CREATE TABLE %s (
  LastAccess TIMESTAMP NOT NULL,
  UserId STRING(36) NOT NULL,
  Page STRING(MAX),
  Bytes INT64
) PRIMARY KEY (LastAccess, UserId)`

// seedStores makes what a config reads and writes ready on the emulators
// (whose databases prepareStores created), saying so on w: a Spanner
// source table is created and loaded with the access-log sample; a
// Datastore source kind gets the customer sample (Customer1 as id 1, with
// its Order children); a Spanner target that rekey cannot derive from its
// source (a files or Datastore source) is created from the rewritten key
// and the columns of the source's records. What exists already is kept;
// rows and entities are upserted, so seeding again changes nothing.
func seedStores(ctx context.Context, cfg *config.Config, w io.Writer) error {
	recs, err := storeKindOf(cfg.Source.Type).seed(ctx, cfg.Source, w) // for a Spanner target
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if storeKindOf(cfg.Target.Type).spannerDB && !storeKindOf(cfg.Source.Type).spannerDB {
		if err := seedSpannerTarget(ctx, cfg, recs, w); err != nil {
			return fmt.Errorf("target: %w", err)
		}
	}
	return nil
}

// localRecords is the seed of a JSON Lines source: nothing is written, and
// the records of a local file are read (the columns of a Spanner target
// made for it); nil for a remote one.
func localRecords(_ context.Context, src config.Endpoint, _ io.Writer) ([]record.Record, error) {
	if strings.Contains(src.Path, "://") {
		return nil, nil
	}
	files, _ := filepath.Glob(src.Path)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s matches no file", src.Path)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	return configs.ParseRecords(files[0], data)
}

func spannerDDL(ctx context.Context, db string, stmts []string) error {
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	op, err := admin.UpdateDatabaseDdl(ctx, &databasepb.UpdateDatabaseDdlRequest{Database: db, Statements: stmts})
	if err != nil {
		return err
	}
	return op.Wait(ctx)
}

// spannerTable opens a client on ep's database and reads ep's table: nil
// when it does not exist.
func spannerTable(ctx context.Context, ep config.Endpoint) (*spanner.Client, *spannerdb.Table, error) {
	c, err := spanner.NewClientWithConfig(ctx, spannerdb.DatabasePath(ep.Project, ep.Instance, ep.Database), spanner.ClientConfig{DisableNativeMetrics: true})
	if err != nil {
		return nil, nil, err
	}
	t, err := spannerdb.ReadTable(ctx, c, ep.Table)
	switch {
	case err == nil:
		return c, t, nil
	case errors.Is(err, spannerdb.ErrTableNotFound):
		return c, nil, nil
	default:
		c.Close()
		return nil, nil, err
	}
}

// seedSpannerSource creates a Spanner source's table for the access-log
// sample, if missing, and loads the sample. It returns no records: a
// Spanner target's table is derived from a Spanner source by the run.
func seedSpannerSource(ctx context.Context, src config.Endpoint, w io.Writer) ([]record.Record, error) {
	db := spannerdb.DatabasePath(src.Project, src.Instance, src.Database)
	c, t, err := spannerTable(ctx, src)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if t == nil {
		if err := spannerDDL(ctx, db, []string{fmt.Sprintf(logsSampleDDL, rewrite.QuoteIdent(src.Table))}); err != nil {
			return nil, fmt.Errorf("creating the table %s: %w", src.Table, err)
		}
		fmt.Fprintf(w, "rekey: source: created the table %s in %s (the access-log sample's columns)\n", src.Table, db)
	} else if t.Key.Text() != "LastAccess TIMESTAMP, UserId STRING(36)" {
		return nil, fmt.Errorf("the table %s exists with the key (%s), not the access-log sample's (LastAccess TIMESTAMP, UserId STRING(36)); load it yourself", src.Table, t.Key.Text())
	}
	recs, err := configs.SampleRecords(logsSample)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i].Table = src.Table
	}
	wr, err := spannerdb.NewWriter(ctx, c, src.Table)
	if err != nil {
		return nil, err
	}
	if err := seedOutcome(wr.Write(ctx, recs)); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "rekey: source: loaded %d rows of %s into %s\n", len(recs), logsSample, src.Table)
	return nil, nil
}

// customerID is N of a sample key name CustomerN.
func customerID(name string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(name, "Customer"), 10, 64)
	return n, err == nil && strings.HasPrefix(name, "Customer")
}

// seedDatastoreSource writes the customer sample into the source's
// namespace: the root kind is the source's kind, CustomerN becomes id N
// (sequential ids: what the bundled rewrites spread out, and what a
// Spanner INT64 key takes). It returns the root entities written.
func seedDatastoreSource(ctx context.Context, src config.Endpoint, w io.Writer) ([]record.Record, error) {
	recs, err := configs.SampleRecords(customersSample)
	if err != nil {
		return nil, err
	}
	var roots []record.Record
	for i := range recs {
		k := recs[i].Key
		k.Namespace = src.Namespace
		for j := range k.Path {
			if id, ok := customerID(k.Path[j].Name); ok && k.Path[j].Kind == "Customer" {
				k.Path[j].Name, k.Path[j].ID = "", id
			}
		}
		k.Path[0].Kind = src.Kind
		if len(k.Path) == 1 {
			roots = append(roots, recs[i])
		}
	}
	c, err := datastoredb.Client(ctx, src.Project, src.Database)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := seedOutcome(datastoredb.NewWriter(c).Write(ctx, recs)); err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "rekey: source: wrote %d entities of %s into Datastore project %s, %s: %d of kind %s (ids 1..%d) and their Order children\n",
		len(recs), customersSample, src.Project, orDefault("namespace", src.Namespace), len(roots), src.Kind, len(roots))
	return roots, nil
}

// seedOutcome is the error of a seeding write: its own, or a refused
// record's.
func seedOutcome(out storewrite.Outcome, err error) error {
	if err != nil {
		return err
	}
	if n := len(out.DeadLetters); n > 0 {
		return fmt.Errorf("%d records refused, the first: %s", n, out.DeadLetters[0])
	}
	return nil
}

// seedSpannerTarget creates a Spanner target table rekey cannot derive
// (its source is not Spanner): keyed by the rewritten source.key, with a
// column for every other field of the source's records (recs), typed
// after their values, and the keep_original_key column.
func seedSpannerTarget(ctx context.Context, cfg *config.Config, recs []record.Record, w io.Writer) error {
	tgt := cfg.Target
	c, t, err := spannerTable(ctx, tgt)
	if err != nil {
		return err
	}
	c.Close()
	if t != nil {
		fmt.Fprintf(w, "rekey: target: the table %s exists\n", tgt.Table)
		return nil
	}
	in, ok, err := cfg.SourceKey()
	if err != nil || !ok {
		return fmt.Errorf("source.key is needed to make the table %s (%v)", tgt.Table, err)
	}
	s, err := rewrite.New(cfg.Rewrite.Step())
	if err != nil {
		return err
	}
	rw, err := s.Spanner(in)
	if err != nil {
		return err
	}
	table := &spannerdb.Table{Name: tgt.Table}
	for _, r := range recs {
		for _, f := range r.Fields {
			typ := spannerType(f.Value.Kind)
			if typ == "" || in.Index(f.Name) >= 0 || table.Column(f.Name) != nil {
				continue
			}
			table.Columns = append(table.Columns, spannerdb.Column{Name: f.Name, Type: typ})
		}
	}
	var extra []spannerdb.Column
	if cfg.KeepOriginalKey != "" {
		extra = append(extra, spannerdb.Column{Name: cfg.KeepOriginalKey, Type: "STRING(MAX)"})
	}
	table = table.WithKey(rw.Out(), extra)
	table.Key.Table = tgt.Table
	ddl := table.CreateDDL(tgt.Table)
	if err := spannerDDL(ctx, spannerdb.DatabasePath(tgt.Project, tgt.Instance, tgt.Database), []string{ddl}); err != nil {
		return fmt.Errorf("creating the table %s: %w", tgt.Table, err)
	}
	fmt.Fprintf(w, "rekey: target: created the table %s for the rewritten key and the source records' fields:\n%s\n", tgt.Table, ddl)
	return nil
}

// spannerType is the column type of a record value's kind; "" for kinds
// left out (null, nested).
func spannerType(k record.Kind) string {
	types := map[record.Kind]string{record.KindInt: "INT64", record.KindFloat: "FLOAT64", record.KindString: "STRING(MAX)",
		record.KindBool: "BOOL", record.KindBytes: "BYTES(MAX)", record.KindTimestamp: "TIMESTAMP", record.KindDate: "DATE",
		record.KindNumeric: "NUMERIC", record.KindJSON: "JSON"}
	return types[k]
}
