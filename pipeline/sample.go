package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// sampleSize is how many old -> new keys a dry run shows.
const sampleSize = 5

// Sample reads the first n records of the job's source (source.Peek*)
// and rewrites them as the pipeline does, returning "old -> new" per
// record ("old: reason" for one the rewrite refuses). A redrive samples
// nothing: its records are in the dead-letter file.
func Sample(ctx context.Context, j *migration.Job, n int) ([]string, error) {
	if j.RedriveFrom != "" {
		return nil, nil
	}
	k, err := sourceOf(j)
	if err != nil {
		return nil, err
	}
	recs, err := k.peek(ctx, j, n)
	if err != nil {
		return nil, fmt.Errorf("sampling the source: %w", err)
	}
	rk, err := j.Spec.Build()
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range recs {
		old := keyText(&recs[i], j.SourceKey)
		if err := rk.Rewrite(&recs[i]); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", old, err))
			continue
		}
		out = append(out, old+" -> "+keyText(&recs[i], j.TargetKey))
	}
	return out, nil
}

// keyText renders a record's key: a Datastore key, or the values of a
// Spanner row's key columns ks.
func keyText(r *record.Record, ks rewrite.KeySchema) string {
	if r.Key != nil {
		return r.Key.String()
	}
	if len(ks.Columns) == 0 {
		return r.Describe()
	}
	vals := make([]string, len(ks.Columns))
	for i, c := range ks.Columns {
		v, _ := r.Get(c.Name)
		vals[i] = v.String()
	}
	return "(" + strings.Join(vals, ", ") + ")"
}
