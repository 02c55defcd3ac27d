package jobs

import "time"

// SetClock makes the member started with cfg read its wall clock from now.
func SetClock(cfg *Config, now func() time.Time) { cfg.now = now }
