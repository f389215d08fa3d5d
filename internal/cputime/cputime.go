// Package cputime reads the CPU time this process has used, for the
// benchmarks that report CPU per message (ferry bench pipeline and
// client). It is the one reader of getrusage outside tests.
package cputime
