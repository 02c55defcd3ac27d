// Package proctest holds the multi-process test of the member runtime: a
// fleet of real OS processes (the test binary re-executed) sharing the
// partitions of a group through a real Redis, one SQLite file or a
// PostgreSQL schema, while the test kills, cuts off, freezes them, restarts
// the Redis server under them or has the PostgreSQL server terminate their
// connections. Everything is
// in the _test.go files; this file only names the package.
package proctest
