// Package servertest runs the real servers connector tests talk to
// (RabbitMQ, ClickHouse, S3, InfluxDB, MongoDB ...): each as a process
// group of its own, on free loopback ports, with its files in a temporary
// directory, as the server's own user when the caller is root, killed as a
// crash kills it (Kill) and started again on the same data (Restart).
//
// Each kind of server is a Server in its own package (amqptest.Server,
// chtest.Server ...). A test asks it for the address (URL): the one
// scripts/test.sh started for the whole run and named in the environment,
// or else one the test binary starts on first use and stops in Main. Where
// no server can be had, the test is skipped with the reason, unless the
// kind's FERRY_REQUIRE_* variable is 1 (scripts/test.sh sets them, so CI
// never skips), in which case it fails.
//
// cmd/testservers starts the servers of a test run together, in parallel,
// with the same code the tests use, so a server is configured in one place.
//
// Written by hand: the test-container libraries want a Docker engine, and
// none runs on these machines.
package servertest
