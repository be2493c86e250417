package spannerdb

import "fmt"

// DatabasePath is the resource name of a Spanner database,
// projects/P/instances/I/databases/D, as the clients take it.
func DatabasePath(project, instance, database string) string {
	return fmt.Sprintf("projects/%s/instances/%s/databases/%s", project, instance, database)
}
