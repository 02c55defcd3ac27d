package main

import "os"

// nameShim names the shim process "herd" (its comm, which ps, top and
// pgrep show): it runs as /proc/self/exe, which the kernel names "exe".
// /proc/self/comm is the main thread's name (prctl would name only the
// calling thread, any of the runtime's).
func nameShim() {
	_ = os.WriteFile("/proc/self/comm", []byte("herd"), 0)
}
