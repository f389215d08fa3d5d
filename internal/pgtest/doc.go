// Package pgtest gives tests a real PostgreSQL: the cluster named by
// FERRY_TEST_POSTGRES_DSN (scripts/test.sh starts one), or else a
// throwaway cluster of its own (initdb + pg_ctl on a free loopback port in
// a temporary directory, with wal_level=logical), one per test binary.
//
// Each test gets its own database (DB), dropped with its replication slots
// when the test ends. When no PostgreSQL can be had, tests are skipped with
// the reason, unless FERRY_REQUIRE_POSTGRES=1 (set by scripts/test.sh, so CI
// never skips), in which case they fail.
//
// A test that takes the database down gets a cluster of its own with
// Private, and stops and starts it with Halt and Resume (same port, same
// data), so the tests sharing the server keep running.
//
// A test binary that uses the package runs its tests through Main, so the
// cluster it may start is stopped when the tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
package pgtest
