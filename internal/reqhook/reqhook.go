// Package reqhook is the bridge through which package jobs gives a herd
// member the function that receives the requests its group's log carries
// for keys (store.RequestRun, RequestPause, RequestResume), kept in an
// unexported field of herd.Config so that it is no part of the public
// Config: a group of plain partitions has no use for them.
package reqhook

// SetHerdHandler is set by package herd: func(*herd.Config, func(store.Request)).
// The function is called by the member's log reader, for every request
// entry it reads (a leave request too, after the member has acted on it),
// and must not block.
var SetHerdHandler any

// SetHerdOwnLoads is set by package herd: func(*herd.Config). The member
// then measures a partition's load only from what its handler reports
// (Claim.ReportLoad), never from its marks: a job's key checkpoints twice
// per run, however long the run.
var SetHerdOwnLoads any
