package phases

import (
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/rewrite"
)

// Backfill is what a cohort backfill (rekey run --cohorts) writes by: the
// migration whose touched marks it consults, and the cohorts it copies
// with the time each entered the phase it is in (dual_write, unless the
// backfill was forced). A record is written only if the application has
// not touched its new key since its cohort's Since (see the package doc,
// "Why no acknowledged write is lost"). It is plain data: it travels in a
// Beam sink's configuration.
type Backfill struct {
	Migration string         `json:"migration"`
	Spans     []BackfillSpan `json:"spans"`
	// Namespace is the Datastore namespace of the phase store and the
	// touched marks (the target's).
	Namespace string `json:"namespace,omitempty"`
	// Reverse, if set, makes it a reverse backfill: old is written, each
	// record as new holds it when the record is written (see Reverse).
	Reverse *Reverse `json:"reverse,omitempty"`
}

// BackfillSpan is cohorts First..Last, in their phase since Since.
type BackfillSpan struct {
	First int       `json:"first"`
	Last  int       `json:"last"`
	Phase Phase     `json:"phase"`
	Since time.Time `json:"since"`
}

// Cohorts returns the backfill's cohorts as ranges.
func (b Backfill) Cohorts() []cohort.Range {
	rs := make([]cohort.Range, len(b.Spans))
	for i, s := range b.Spans {
		rs[i] = cohort.Range{First: s.First, Last: s.Last}
	}
	return cohort.Merge(rs)
}

// since returns when cohort c entered its phase, false if the backfill
// does not copy c.
func (b Backfill) since(c int) (time.Time, bool) {
	for _, s := range b.Spans {
		if c >= s.First && c <= s.Last {
			return s.Since, true
		}
	}
	return time.Time{}, false
}

// Stops reports whether a key's touched mark (of cohort c, made at
// touchedAt, saying behind) stops the backfill or repair from writing
// new as old holds it: the application touched the key since (keeps);
// old is behind new for it (new holds the newer value); or the cohort is
// in read_new, where new is authoritative and only what the mark says new
// missed is copied (a repair: an entry of the log whose write new has
// taken since, or whose later write old missed, must not be undone).
func (b Backfill) Stops(c int, touchedAt time.Time, behind string) bool {
	if b.keeps(c, touchedAt) || behind == BehindOld {
		return true
	}
	for _, s := range b.Spans {
		if c >= s.First && c <= s.Last && s.Phase == ReadNew {
			return behind != BehindNew
		}
	}
	return false
}

// keeps reports whether a touched mark of cohort c made at touchedAt
// stops the backfill: the application wrote or deleted the record after
// its cohort entered the phase, so what the application did is newer than
// what the backfill read. A mark of a cohort the backfill does not copy
// stops it too (the record's user changed: leave the application's write).
func (b Backfill) keeps(c int, touchedAt time.Time) bool {
	since, ok := b.since(c)
	return !ok || touchedAt.After(since)
}

// SpannerKeyText is the text of the key k of a row of table as the
// library names it in the touched marks, the repair log and messages:
// rekey's key notation, after the table's name for a child table
// ("Orders[7,1]"). The operator's jobs name rows by it too.
func SpannerKeyText(table string, child bool, k []rewrite.Value) string {
	if child {
		return table + rewrite.FormatKey(k, false)
	}
	return rewrite.FormatKey(k, false)
}

// DatastoreMarkKey is the key of the touched mark of new entity key k of
// migration, the marks being in namespace (the target's): by the key's
// path, whatever its namespace.
func DatastoreMarkKey(migration, namespace string, k rewrite.DatastoreKey) *datastore.Key {
	k.Namespace, k.Database = "", ""
	tk := datastore.NameKey(DatastoreTouchedKind, migration+"|"+k.String(), nil)
	tk.Namespace = namespace
	return tk
}
