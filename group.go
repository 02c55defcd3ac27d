package herd

import (
	"context"
	"fmt"

	"github.com/herdhq/herd/store"
)

// ErrGroupInUse is returned by DeleteGroup when members of the group are
// alive and force is not set.
var ErrGroupInUse = store.ErrGroupInUse

// DeleteGroup deletes everything st holds for group: sessions, partition set,
// ownership records and checkpoints. It refuses with ErrGroupInUse while a
// member's session is alive, unless force is set. Forcing while members run
// is rarely what you want: they find their sessions gone, as after a store
// that lost its data, and write back the partition set and the checkpoints
// they hold. Make them Leave first, or stop them and force.
func DeleteGroup(ctx context.Context, st store.Store, group string, force bool) error {
	if err := store.ValidateID("group", group); err != nil {
		return fmt.Errorf("herd: delete group: %w", err)
	}
	if err := st.DeleteGroup(ctx, group, force); err != nil {
		return fmt.Errorf("herd: delete group %q: %w", group, err)
	}
	return nil
}
