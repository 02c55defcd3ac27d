package main

import (
	"runtime"
	"runtime/debug"
)

// version is what --version prints: the module version when herd was
// installed with go install module@version, else the VCS revision it was
// built from (with "+dirty" for uncommitted changes), and the Go version.
func version() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		switch {
		case bi.Main.Version != "" && bi.Main.Version != "(devel)":
			v = bi.Main.Version
		case rev != "":
			v = "devel-" + rev[:min(12, len(rev))]
			if dirty {
				v += "+dirty"
			}
		}
	}
	return v + " (" + runtime.Version() + ")"
}
