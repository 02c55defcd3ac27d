package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// herdResult is what one run of the built herd binary did.
type herdResult struct {
	stdout, stderr string
	code           int // exit status
}

// runHerdBin runs the built herd binary with args in dir ("": the test's
// working directory) with env added to this process's environment, and
// waits for it (at most 30 s).
func runHerdBin(t *testing.T, dir string, env []string, args ...string) herdResult {
	t.Helper()
	bin := buildHerd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "herd"), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH")), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("herd %q: %v", args, err)
	}
	return herdResult{stdout: out.String(), stderr: errOut.String(), code: code}
}
