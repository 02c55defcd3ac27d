// Package etcdstore is the etcd backend of the store contract, on
// go.etcd.io/etcd/client/v3: open it with Open (etcd://, etcds://) or New.
//
// Every key is under a prefix (DefaultPrefix), and a group's keys under a
// prefix of the group's (see groupKey). Sessions are etcd leases, counted
// by the cluster; ownership records, checkpoints and the partition set are
// keys; every change is one transaction that compares what its decision
// read (records' revisions, sessions' liveness keys) and logs the change
// with it: at once if the group's log sequence is as read and nothing is
// pending, else in a pending key that readers number after the sequenced
// entries and the writer then sequences (pending.go). So the log is a
// gap-free per-group sequence next to etcd's cluster-wide revisions, and
// writers of different partitions of a group do not take turns.
// An entry's time (store.Change.At, its JSON field "at") is the writing
// process's clock when it committed the transaction: etcd gives no server
// time, so entries of different writers are only as ordered in time as
// their hosts' clocks agree. Entries of an older herd have none.
// A batch is split into transactions of at most claimChunk (batchChunk)
// partitions (etcd's default --max-txn-ops is 128) and a partition set
// into chunks (its default --max-request-bytes is 1.5 MiB): the cluster
// needs no setting of its own. docs/etcd.md says how to run it.
package etcdstore
