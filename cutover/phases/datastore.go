package phases

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cohort"
	"github.com/rekeyio/rekey/internal/store/datastoredb"
)

// The Datastore kinds of the phase store: an entity per migration (named
// by it: its version and number of cohorts) and, under it, its spans and
// its audit records, so that a move reads and writes one entity group in
// one transaction.
const (
	DatastoreMigrationKind = "RekeyCutover"
	DatastorePhaseKind     = "RekeyCohortPhase"
	DatastoreAuditKind     = "RekeyCohortAudit"
)

// The Datastore kinds of the repair log and the touched marks (see
// SpannerRepairTable and SpannerTouchedTable), in the target namespace.
const (
	DatastoreRepairKind  = "RekeyRepair"
	DatastoreTouchedKind = "RekeyTouched"
)

// DatastoreMark is a touched mark as the Datastore library stores it, of
// kind DatastoreTouchedKind, keyed by DatastoreMarkKey: the
// application's last write or delete of a new key while its cohort is
// between dual_write and read_new (see SpannerTouchedTable).
type DatastoreMark struct {
	Migration string    `datastore:",noindex"`
	Cohort    int64     `datastore:",noindex"`
	Deleted   bool      `datastore:",noindex"`
	TouchedAt time.Time `datastore:",noindex"`
	// Op names the call whose write left the mark; Behind is "old" or
	// "new" when that store missed a write the other took (see
	// SpannerTouchedTable).
	Op     string `datastore:",noindex,omitempty"`
	Behind string `datastore:",noindex,omitempty"`
}

// DatastoreRepair is an entry of the repair log as the Datastore library
// stores it, of kind DatastoreRepairKind, named by the migration and a
// unique id (see RepairEntry).
type DatastoreRepair struct {
	Migration string
	Cohort    int64
	Op        string    `datastore:",noindex"`
	OldKey    string    `datastore:",noindex"`
	Missed    string    `datastore:",noindex"`
	Reason    string    `datastore:",noindex"`
	LoggedAt  time.Time `datastore:",noindex"`
}

type dsMigration struct {
	Buckets   int64     `datastore:",noindex"`
	Version   int64     `datastore:",noindex"`
	UpdatedAt time.Time `datastore:",noindex"`
}

type dsSpan struct {
	FirstCohort int64     `datastore:",noindex"`
	LastCohort  int64     `datastore:",noindex"`
	Phase       string    `datastore:",noindex"`
	Since       time.Time `datastore:",noindex"`
	ChangedBy   string    `datastore:",noindex"`
	PrevPhase   string    `datastore:",noindex,omitempty"`
}

type dsAudit struct {
	Version   int64     `datastore:",noindex"`
	ChangedAt time.Time `datastore:",noindex"`
	Who       string    `datastore:",noindex"`
	Why       string    `datastore:",noindex"`
	Cohorts   string    `datastore:",noindex"`
	FromPhase string    `datastore:",noindex"`
	ToPhase   string    `datastore:",noindex"`
	Forced    bool      `datastore:",noindex"`
}

// DatastoreStore is a Store in a Datastore namespace. The Go client does
// not return commit times, so a move's time is the client's clock when
// its transaction reads: Rules.DualWriteHold's skew margin covers the
// clocks of the machines that move cohorts.
type DatastoreStore struct {
	Client    *datastore.Client
	Namespace string
	// now is the clock (tests replace it).
	now func() time.Time
}

func (s DatastoreStore) root(migration string) *datastore.Key {
	k := datastore.NameKey(DatastoreMigrationKind, migration, nil)
	k.Namespace = s.Namespace
	return k
}

func (s DatastoreStore) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now().UTC()
}

// load reads a migration's map, in tx if not nil; it returns the span
// entities' keys too.
func (s DatastoreStore) load(ctx context.Context, tx *datastore.Transaction, migration string) (*Map, []*datastore.Key, error) {
	m := &Map{Migration: migration}
	root := s.root(migration)
	var mig dsMigration
	var err error
	if tx != nil {
		err = tx.Get(root, &mig)
	} else {
		err = s.Client.Get(ctx, root, &mig)
	}
	switch {
	case errors.Is(err, datastore.ErrNoSuchEntity):
		return m, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading %s %s: %w", DatastoreMigrationKind, migration, err)
	}
	m.Buckets, m.Version = int(mig.Buckets), mig.Version
	q := datastore.NewQuery(DatastorePhaseKind).Namespace(s.Namespace).Ancestor(root)
	if tx != nil {
		q = q.Transaction(tx)
	}
	var spans []dsSpan
	keys, err := s.Client.GetAll(ctx, q, &spans)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the %s of %s: %w", DatastorePhaseKind, migration, err)
	}
	for _, e := range spans {
		p, err := ParsePhase(e.Phase)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s cohorts %d-%d: %w", DatastorePhaseKind, migration, e.FirstCohort, e.LastCohort, err)
		}
		sp := Span{Range: cohort.Range{First: int(e.FirstCohort), Last: int(e.LastCohort)}, Phase: p, Since: e.Since, By: e.ChangedBy}
		if e.PrevPhase != "" {
			if sp.Prev, err = ParsePhase(e.PrevPhase); err != nil {
				return nil, nil, fmt.Errorf("%s %s cohorts %d-%d: %w", DatastorePhaseKind, migration, e.FirstCohort, e.LastCohort, err)
			}
		}
		m.Spans = append(m.Spans, sp)
	}
	sort.Slice(m.Spans, func(i, j int) bool { return m.Spans[i].First < m.Spans[j].First })
	return m, keys, nil
}

// Load implements Store: a get and a strongly consistent ancestor query.
func (s DatastoreStore) Load(ctx context.Context, migration string) (*Map, error) {
	m, _, err := s.load(ctx, nil, migration)
	return m, err
}

// Move implements Store.
func (s DatastoreStore) Move(ctx context.Context, mv Move) (*Map, Audit, error) {
	if missed, ok := missedRefused(mv); ok {
		// Outside the move's transaction, which cannot query (see
		// SpannerStore.Move).
		es, err := s.Repairs(ctx, mv.Migration)
		if err != nil {
			return nil, Audit{}, err
		}
		var n int64
		for _, e := range es {
			for _, r := range mv.Cohorts {
				if r.Contains(e.Cohort) && e.Missed == missed {
					n++
				}
			}
		}
		if err := missedRefusal(mv, missed, n); err != nil {
			return nil, Audit{}, err
		}
	}
	var m *Map
	var a Audit
	var refusal error
	err := datastoredb.Transact(ctx, s.Client, func(tx *datastore.Transaction) error {
		refusal = nil
		var old []*datastore.Key
		var err error
		if m, old, err = s.load(ctx, tx, mv.Migration); err != nil {
			return err
		}
		now := s.clock()
		if a, refusal = m.apply(mv, now); refusal != nil {
			return errRefused
		}
		m.settle(now)
		a.At = now
		root := s.root(mv.Migration)
		if err := tx.DeleteMulti(old); err != nil {
			return err
		}
		keys := make([]*datastore.Key, len(m.Spans))
		ents := make([]dsSpan, len(m.Spans))
		for i, sp := range m.Spans {
			keys[i] = datastore.IDKey(DatastorePhaseKind, int64(sp.First)+1, root)
			keys[i].Namespace = s.Namespace
			ents[i] = dsSpan{FirstCohort: int64(sp.First), LastCohort: int64(sp.Last), Phase: string(sp.Phase), Since: sp.Since, ChangedBy: sp.By, PrevPhase: string(sp.Prev)}
		}
		if _, err := tx.PutMulti(keys, ents); err != nil {
			return err
		}
		return s.putRecord(tx, m, a)
	})
	if refusal != nil {
		return nil, Audit{}, refusal
	}
	if err != nil {
		return nil, Audit{}, fmt.Errorf("moving cohorts of %s: %w", mv.Migration, err)
	}
	return m, a, nil
}

// putRecord puts what every move and note writes besides the spans: the
// migration's entity with its version, and the audit record (at a.At).
func (s DatastoreStore) putRecord(tx *datastore.Transaction, m *Map, a Audit) error {
	root := s.root(m.Migration)
	if _, err := tx.Put(root, &dsMigration{Buckets: int64(m.Buckets), Version: m.Version, UpdatedAt: a.At}); err != nil {
		return err
	}
	ak := datastore.IDKey(DatastoreAuditKind, a.Version, root)
	ak.Namespace = s.Namespace
	_, err := tx.Put(ak, &dsAudit{Version: a.Version, ChangedAt: a.At, Who: a.Who, Why: a.Why, Cohorts: a.Cohorts, FromPhase: a.From, ToPhase: a.toText(), Forced: a.Forced})
	return err
}

// Note implements Store.
func (s DatastoreStore) Note(ctx context.Context, n Note) (Audit, error) {
	var a Audit
	var refusal error
	err := datastoredb.Transact(ctx, s.Client, func(tx *datastore.Transaction) error {
		m, _, err := s.load(ctx, tx, n.Migration)
		if err != nil {
			return err
		}
		if a, refusal = m.note(n); refusal != nil {
			return errRefused
		}
		a.At = s.clock()
		return s.putRecord(tx, m, a)
	})
	if refusal != nil {
		return Audit{}, refusal
	}
	if err != nil {
		return Audit{}, fmt.Errorf("recording the %s of cohorts of %s: %w", n.Action, n.Migration, err)
	}
	return a, nil
}

// Audits implements Store.
func (s DatastoreStore) Audits(ctx context.Context, migration string) ([]Audit, error) {
	var ents []dsAudit
	if _, err := s.Client.GetAll(ctx, datastore.NewQuery(DatastoreAuditKind).Namespace(s.Namespace).Ancestor(s.root(migration)), &ents); err != nil {
		return nil, fmt.Errorf("reading the %s of %s: %w", DatastoreAuditKind, migration, err)
	}
	out := make([]Audit, len(ents))
	for i, e := range ents {
		out[i] = Audit{Migration: migration, Version: e.Version, At: e.ChangedAt, Who: e.Who, Why: e.Why, Cohorts: e.Cohorts, From: e.FromPhase, Forced: e.Forced}
		out[i].setTo(e.ToPhase)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
