package spannerdbtest

import (
	"context"
	"sync"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/rewrite"
)

// IDTable returns the schema of table T (Id INT64 NOT NULL, the key), the
// table of FakeCommit's rows.
func IDTable() *spannerdb.Table {
	t := &spannerdb.Table{Name: "T", Columns: []spannerdb.Column{{Name: "Id", Type: "INT64", NotNull: true}}}
	t.Key, _ = rewrite.ParseKeySchema("T", "Id INT64")
	return t
}

// FakeCommit returns a spannerdb.CommitFunc that stores nothing: a commit
// fails with the error fail returns for the first of its rows' Ids it
// refuses, and otherwise appends its Ids to *commits (under a mutex:
// commits may run on goroutines; read it once they are done).
func FakeCommit(fail func(id int64) error) (commit spannerdb.CommitFunc, commits *[][]int64) {
	var mu sync.Mutex
	commits = new([][]int64)
	return func(_ context.Context, _ bool, rows []spannerdb.Row) error {
		mu.Lock()
		defer mu.Unlock()
		var got []int64
		for _, r := range rows {
			id, _ := r.Record.Get("Id")
			if err := fail(id.Int); err != nil {
				return err
			}
			got = append(got, id.Int)
		}
		*commits = append(*commits, got)
		return nil
	}, commits
}
