// Package integration holds tests that run rekey against the local Google
// emulators (see scripts/test.sh). It has no code of its own.
//
// The equality tests prove that the rewrite strategies compute, for every
// key tried, exactly what the GoogleSQL expressions they print compute on
// the Spanner emulator.
package integration
