// Package integration holds tests that run rekey against the local Google
// emulators (see scripts/test.sh). It has no code of its own.
//
// The equality tests prove that the rewrite strategies compute, for every
// key tried, exactly what the GoogleSQL expressions they print compute on
// the Spanner emulator. The staged-cutover tests (staged_helpers_test.go
// builds their two stores' migrations) run the cohort jobs — backfill,
// verify, repair, reverse backfill, cleanup, load — against an
// application library, and staged_e2e_test.go the whole staged
// migration while a simulated application runs.
package integration
