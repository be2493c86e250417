package splits

import (
	"fmt"
	"strings"
	"time"
)

// Advice is what whoever adds the points for table (with its interleaved
// children, if any) must know, one sentence each, from Spanner's
// documentation of split points: when to add them, that children follow
// their parent, when they expire and what removes them.
func Advice(table string, children []string, expire time.Time) []string {
	out := []string{
		fmt.Sprintf("the points are for %s, the root table written", table),
	}
	if len(children) > 0 {
		out = append(out, fmt.Sprintf("its interleaved children (%s) are stored under their parent rows and split with them: they need no points of their own", strings.Join(children, ", ")))
	}
	return append(out,
		"add them between 7 days and 12 hours before the load starts",
		fmt.Sprintf("they expire at %s; to remove them sooner (and before dropping the table or an index) add them again with an expiry in the past", expire.UTC().Format(time.RFC3339)),
		"backups do not keep split points: a restored database needs them added again",
	)
}
