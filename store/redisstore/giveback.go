package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/herdhq/herd/store"
)

// GiveBack implements store.Store: Release, and the partition's field in
// the givenback hash set to session, in one script.
func (s *Store) GiveBack(ctx context.Context, group, partition, session string, epoch uint64) error {
	if err := s.begin(ctx, "GiveBack", store.ValidateGiveBack(group, partition, session, epoch)); err != nil {
		return err
	}
	k := s.keys(group)
	status, _, err := s.runLogged(ctx, "GiveBack", giveBackScript, k, []string{k.sessions, k.members, k.owners, k.givenback},
		partition, session, strconv.FormatUint(epoch, 10))
	if err != nil {
		return err
	}
	switch status {
	case "ok":
		return nil
	case "notowner":
		return fmt.Errorf("redisstore: GiveBack of %q at epoch %d by session %q: %w", partition, epoch, session, store.ErrNotOwner)
	}
	return unexpected("GiveBack", status)
}

// mark is a GivenBack mark as read from the givenback hash. One that is
// not a session id this store makes (written by something else) names no
// session that can be alive, so it is moot and reads as none.
func mark(v string) string {
	if !store.IsSessionID(v) {
		return ""
	}
	return v
}
