// Package archtest holds no code: its tests check facts of the
// architecture that the compiler does not, against what `go list` says the
// build really imports: docs/architecture.md's import table, and that the
// backend depends on no edge package.
//
// It is not where the steps are tested: each package tests itself.
package archtest
