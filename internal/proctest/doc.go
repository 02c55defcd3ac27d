// Package proctest holds the multi-process test of the member runtime: a
// fleet of real OS processes (the test binary re-executed) sharing the
// partitions of a group through a real Redis, while the test kills, cuts
// off, freezes them or restarts the Redis server under them. Everything is
// in the _test.go files; this file only names the package.
package proctest
