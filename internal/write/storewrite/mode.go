package storewrite

import "fmt"

// Write modes, the same for both stores (config's write.mode).
const (
	// ModeUpsert writes every record whether or not its key exists,
	// replacing what is stored (Spanner InsertOrUpdate, Datastore upsert):
	// idempotent, so a re-run converges. The default.
	ModeUpsert = "upsert"
	// ModeInsert writes only keys that do not exist yet (Spanner Insert,
	// Datastore insert). The store refuses a commit that meets an
	// existing key with AlreadyExists; the writer then reads the
	// commit's keys back: a record stored with the same content (an
	// earlier run's write) counts as written, one stored with other
	// content is dead-lettered, and the rest is committed again.
	ModeInsert = "insert"
	// ModeDelete deletes the record's key instead of writing the record
	// (Spanner Delete, Datastore delete): only the key is read from it. A
	// key that is not stored is no error, so deletes are idempotent and a
	// re-run converges. It is a sink's mode for a cohort cleanup (rekey
	// cohort cleanup), never a config's write.mode.
	ModeDelete = "delete"
)

// CheckMode reports whether mode is a writer's mode: a write mode ("" is
// ModeUpsert) or ModeDelete.
func CheckMode(mode string) error {
	switch mode {
	case "", ModeUpsert, ModeInsert, ModeDelete:
		return nil
	}
	return fmt.Errorf("write mode %q: want %q, %q or %q", mode, ModeUpsert, ModeInsert, ModeDelete)
}
