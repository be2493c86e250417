package phases

import "github.com/rekeyio/rekey/rekeyer"

// Reverse says how a reverse backfill computes, for an old record it
// writes, the new record it copies: the migration's rekeyer spec (its
// forward rewrite gives the new key, its inverse turns the new record
// back) and, for Spanner, the new tables' names and database (the jobs
// read their schemas there).
type Reverse struct {
	Spec rekeyer.Text `json:"spec"`
	// NewTable is the new Spanner table's name; NewDatabase its database
	// (projects/P/instances/I/databases/D).
	NewTable    string `json:"new_table,omitempty"`
	NewDatabase string `json:"new_database,omitempty"`
	// NewChildren are the names of the new interleaved tables (the old
	// ones' names).
	NewChildren []string `json:"new_children,omitempty"`
	// NewProject and NewDatastoreDB name the new Datastore database, and
	// OldNamespace the namespace old records go to.
	NewProject     string `json:"new_project,omitempty"`
	NewDatastoreDB string `json:"new_datastore_db,omitempty"`
	OldNamespace   string `json:"old_namespace,omitempty"`
}
