// Package netpart runs herd run members each in a network namespace of its
// own, against a store server started on the root side of their veth pairs,
// injects network faults chosen at random from a seed (a member cut off, its
// packets delayed or dropped, the store cut off from everyone), and checks
// the whole history the members' children recorded.
//
// It needs root, ip, tc and redis-server; its test skips without them, and
// with -short. docs/partitions.md describes the faults, the checks and how to
// rerun one seed.
package netpart
