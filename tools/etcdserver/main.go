// Command etcdserver is etcd's own server (go.etcd.io/etcd/server/v3,
// etcdmain), built from its Go module for herd's tests of store/etcdstore.
// It is a module of its own so that the server's dependencies stay out of
// herd's go.mod: internal/etcdtest builds it into a cache directory and
// starts it with etcd's usual flags.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
