// Package workload is the data and the rewrite that bench/cpu's two sides
// share: the rows (Spanner table Accounts) and entities (kind Account) they
// move, the target table's DDL, and the key rewrites, as rewrite
// configurations for the plain program and as YAML for rekey's configs, so
// that both sides compute the same new keys.
package workload

import (
	"bufio"
	"fmt"
	"os"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Names of the table, the kind and the source key.
const (
	Table = "Accounts"
	Kind  = "Account"
	// SourceKey is the key of the source rows as Spanner DDL columns
	// (source.key of a JSON Lines source).
	SourceKey = "AccountId STRING(36), Seq INT64"
	// ShardColumn is the key column the shard rewrite puts in front.
	ShardColumn = "ShardId"
)

// SourceDDL creates the source table of the Spanner → Spanner path.
const SourceDDL = `CREATE TABLE Accounts (
	AccountId STRING(36) NOT NULL,
	Seq INT64 NOT NULL,
	Name STRING(64),
	Email STRING(128),
	Amount INT64,
	Note STRING(256),
) PRIMARY KEY (AccountId, Seq)`

// TargetDDL creates the target table of every path into Spanner: the
// source's columns under the key the shard rewrite gives.
const TargetDDL = `CREATE TABLE Accounts (
	ShardId INT64 NOT NULL,
	AccountId STRING(36) NOT NULL,
	Seq INT64 NOT NULL,
	Name STRING(64),
	Email STRING(128),
	Amount INT64,
	Note STRING(256),
) PRIMARY KEY (ShardId, AccountId, Seq)`

// Columns are the source table's columns, in order.
var Columns = []string{"AccountId", "Seq", "Name", "Email", "Amount", "Note"}

// Shard is the rewrite of the row paths: ShardId =
// ABS(MOD(FARM_FINGERPRINT(AccountId), 16)) in front of the key.
var Shard = rewrite.StepConfig{Strategy: "shard", Params: rewrite.Params{"n": 16, "columns": []any{"AccountId"}, "mode": "abs"}}

// ShardYAML is Shard as a config's rewrite section.
const ShardYAML = "{strategy: shard, params: {n: 16, columns: [AccountId], mode: abs}}"

// HashPrefix is the rewrite of the entity paths: hashprefix with its
// defaults (the first 4 hex digits of the MD5 of the key's name or id in
// front of it).
var HashPrefix = rewrite.StepConfig{Strategy: "hashprefix"}

// HashPrefixYAML is HashPrefix as a config's rewrite section.
const HashPrefixYAML = "{strategy: hashprefix}"

const filler = "Preferred contact by email; invoices monthly; net 30 terms agreed with the account team in the last review."

// Account is row (entity) i, about 200 bytes of values: four rows per
// account, accounts in order, so rows are sorted by (AccountId, Seq) and
// entities by name.
type Account struct {
	AccountID string
	Seq       int64
	Name      string
	Email     string
	Amount    int64
	Note      string
}

// Row returns account row i.
func Row(i int) Account {
	a := i / 4
	return Account{
		AccountID: fmt.Sprintf("acct-%08d", a),
		Seq:       int64(i % 4),
		Name:      fmt.Sprintf("Customer %d of region %d", a, a%17),
		Email:     fmt.Sprintf("customer%08d@example.com", a),
		Amount:    int64(i*7919) % 1_000_000,
		Note:      filler[:90+i%16],
	}
}

// EntityName is the name of the entity of a row: AccountId.Seq.
func (a *Account) EntityName() string { return fmt.Sprintf("%s.%d", a.AccountID, a.Seq) }

// Values are the row's values in the order of Columns.
func (a *Account) Values() []any {
	return []any{a.AccountID, a.Seq, a.Name, a.Email, a.Amount, a.Note}
}

// Fields are the row's values as record fields, in the order of Columns.
func (a *Account) Fields() []record.Field {
	return []record.Field{
		{Name: "AccountId", Value: record.String(a.AccountID)},
		{Name: "Seq", Value: record.Int(a.Seq)},
		{Name: "Name", Value: record.String(a.Name)},
		{Name: "Email", Value: record.String(a.Email)},
		{Name: "Amount", Value: record.Int(a.Amount)},
		{Name: "Note", Value: record.String(a.Note)},
	}
}

// WriteJSONL writes rows 0..n-1 to path as rekey's record JSON Lines: as
// Spanner rows (no table: the config names it), or, with entities, as
// Datastore entities of kind Kind named EntityName. It returns the
// file's size in bytes.
func WriteJSONL(path string, n int, entities bool) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf []byte
	var size int64
	for i := range n {
		a := Row(i)
		r := record.Record{Fields: a.Fields()}
		if entities {
			r.Key = &rewrite.DatastoreKey{Path: []rewrite.PathElement{{Kind: Kind, Name: a.EntityName()}}}
		}
		buf = append(record.AppendJSON(buf[:0], &r, false), '\n')
		size += int64(len(buf))
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return 0, err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return size, f.Close()
}
