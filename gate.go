package herd

import "github.com/herdhq/herd/internal/pause"

// The pause hook (package herdtest's Gate) is set in Config.gate through
// this bridge, so that it is no field of the public Config.
func init() {
	pause.SetHerdGate = func(c *Config, g *pause.Gate) { c.gate = g }
}
