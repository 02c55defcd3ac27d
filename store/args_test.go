package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateRejectsAlike: each Validate function of a Store method
// rejects the arguments the contract names with ErrInvalid, and accepts
// valid ones. (The conformance suite checks that every backend calls
// them.)
func TestValidateRejectsAlike(t *testing.T) {
	ok := []byte("x")
	big := make([]byte, MaxCheckpointLength+1)
	bad := map[string]error{
		"OpenSession(empty group)":   ValidateOpenSession("", "m", 1, time.Second),
		"OpenSession(empty member)":  ValidateOpenSession("g", "", 1, time.Second),
		"OpenSession(weight -1)":     ValidateOpenSession("g", "m", -1, time.Second),
		"OpenSession(TTL 0)":         ValidateOpenSession("g", "m", 1, 0),
		"KeepAlive(empty session)":   ValidateKeepAlive("g", "", time.Second),
		"KeepAlive(TTL -1s)":         ValidateKeepAlive("g", "s", -time.Second),
		"CloseSession(control char)": ValidateCloseSession("g", "s\n"),
		"Group(too long)":            ValidateGroup(strings.Repeat("g", MaxIDLength+1)),
		"SetPartitions(weight -1)":   ValidateSetPartitions("g", PartitionSet{Partitions: []Partition{{ID: "p", Weight: -1}}}),
		"Records(twice)":             ValidateRecords("g", []string{"p", "p"}),
		"ClaimBatch(empty session)":  ValidateClaimBatch("g", "", []string{"p"}),
		"ClaimBatch(too many)":       ValidateClaimBatch("g", "s", make([]string, MaxBatch+1)),
		"ReleaseBatch(epoch 0)":      ValidateReleaseBatch("g", "s", []Ownership{{Partition: "p"}}),
		"ReleaseBatch(twice)":        ValidateReleaseBatch("g", "s", []Ownership{{Partition: "p", Epoch: 1}, {Partition: "p", Epoch: 2}}),
		"GiveBack(epoch 0)":          ValidateGiveBack("g", "p", "s", 0),
		"GiveBack(empty partition)":  ValidateGiveBack("g", "", "s", 1),
		"Checkpoint(epoch 0)":        ValidateCheckpoint("g", "p", 0, ok),
		"Checkpoint(too big)":        ValidateCheckpoint("g", "p", 1, big),
		"Changes(max 0)":             ValidateChanges("g", 0),
	}
	for name, err := range bad {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	good := map[string]error{
		"OpenSession":   ValidateOpenSession("g", "m", 0, time.Microsecond),
		"KeepAlive":     ValidateKeepAlive("g", "s", time.Second),
		"CloseSession":  ValidateCloseSession("g", "s"),
		"Group":         ValidateGroup("g"),
		"SetPartitions": ValidateSetPartitions("g", PartitionSet{Partitions: []Partition{{ID: "p"}}}),
		"Records":       ValidateRecords("g", nil),
		"ClaimBatch":    ValidateClaimBatch("g", "s", []string{"p", "q"}),
		"ReleaseBatch":  ValidateReleaseBatch("g", "s", []Ownership{{Partition: "p", Epoch: 1}}),
		"GiveBack":      ValidateGiveBack("g", "p", "s", 1),
		"Checkpoint":    ValidateCheckpoint("g", "p", 1, nil),
		"Changes":       ValidateChanges("g", 1),
	}
	for name, err := range good {
		if err != nil {
			t.Errorf("%s of valid arguments: %v", name, err)
		}
	}
}

func TestSessionIDs(t *testing.T) {
	id := NewSessionID()
	if len(id) != SessionIDLength || !IsSessionID(id) {
		t.Fatalf("NewSessionID() = %q; IsSessionID says %v", id, IsSessionID(id))
	}
	if NewSessionID() == id {
		t.Error("two NewSessionID calls gave the same id")
	}
	for _, bad := range []string{"", strings.ToLower(id), id[:25], id + "A", "s0000000000000001", strings.Repeat("1", 26)} {
		if IsSessionID(bad) {
			t.Errorf("IsSessionID(%q) = true", bad)
		}
	}
}
