package spannerdb

import (
	"context"
	"fmt"
	"strings"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"

	"github.com/rekeyio/rekey/rewrite"
)

// DDL renders the index as its CREATE INDEX statement.
func (ix Index) DDL() string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.Unique {
		b.WriteString("UNIQUE ")
	}
	if ix.NullFiltered {
		b.WriteString("NULL_FILTERED ")
	}
	b.WriteString("INDEX " + rewrite.QuoteIdent(ix.Name) + " ON " + rewrite.QuoteIdent(ix.Table) + " (")
	for i, c := range ix.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rewrite.QuoteIdent(c.Name))
		if c.Desc {
			b.WriteString(" DESC")
		}
	}
	b.WriteString(")")
	if len(ix.Storing) > 0 {
		quoted := make([]string, len(ix.Storing))
		for i, s := range ix.Storing {
			quoted[i] = rewrite.QuoteIdent(s)
		}
		b.WriteString(" STORING (" + strings.Join(quoted, ", ") + ")")
	}
	if ix.Interleave != "" {
		b.WriteString(", INTERLEAVE IN " + rewrite.QuoteIdent(ix.Interleave))
	}
	return b.String()
}

// ReadSchema reads database db's DDL (GetDatabaseDdl; the emulator
// answers it too) and parses it (ParseSchema).
func ReadSchema(ctx context.Context, db string) (*Schema, error) {
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("spanner admin client: %w", err)
	}
	defer admin.Close()
	resp, err := admin.GetDatabaseDdl(ctx, &databasepb.GetDatabaseDdlRequest{Database: db})
	if err != nil {
		return nil, fmt.Errorf("reading the DDL of %s: %w", db, err)
	}
	s, err := ParseSchema(strings.Join(resp.Statements, ";\n") + ";")
	if err != nil {
		return nil, fmt.Errorf("DDL of %s: %w", db, err)
	}
	return s, nil
}
