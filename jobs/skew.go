package jobs

import "time"

// A key's record is written by whichever member owned the key, with that
// member's clock. A record's slot is never legitimately in the future: the
// owner writes a slot once it is due. A slot far ahead of this member's
// clock was written by a member whose clock was ahead (by as much), and
// scheduling from it would silence the key until that time comes: a
// record 7 days ahead would stop a key due every minute for 7 days, on
// every member. So a record whose slot (or, for a retry, whose due time,
// which may be up to RetryMax ahead) is ahead by more than
// Config.ClockSkew is skew: the owner logs it once per key, counts it, and
// schedules the key from its own clock. The counts it carries (runs,
// failures, missed) are kept.

// msgSkewedRecord is logged, once per key and member, for a skewed record.
const msgSkewedRecord = "the key's record is ahead of this member's clock (its writer's clock was ahead): scheduling the key from this member's clock"

// skewed reports whether rec is ahead of now by more than the tolerance,
// logging it the first time for the key and counting it.
func (k *keyRun) skewed(rec Record, now time.Time) bool {
	s := k.s
	tol := s.cfg.ClockSkew
	ahead := rec.Slot.Sub(now)
	if rec.Retry && !rec.NextDue.IsZero() {
		ahead = max(ahead, rec.NextDue.Sub(now)-s.cfg.RetryMax)
	}
	if rec.Slot.IsZero() || ahead <= tol {
		return false
	}
	s.met.skew()
	if _, logged := s.skewLogged.LoadOrStore(k.c.Partition, true); !logged {
		s.log.Warn(msgSkewedRecord, "key", k.c.Partition, "slot", rec.Slot, "ahead", ahead.Round(time.Second),
			"tolerance", tol, "record_owner", rec.Owner, "record_epoch", rec.Epoch)
	}
	return true
}
