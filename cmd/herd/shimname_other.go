//go:build !linux

package main

// nameShim does nothing: elsewhere the shim runs as herd's own path.
func nameShim() {}
