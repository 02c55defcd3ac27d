package main

// One partition's child process: start it, watch it, stop it.

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/herdhq/herd"
	"github.com/herdhq/herd/internal/child"
)

// handle is the member's handler: it runs the partition's child, restarts it
// with backoff when it exits on its own, gives the partition back after
// --max-failures failures in a row, and stops it when the claim ends.
func (r *runner) handle(c *herd.Claim) error {
	r.mu.Lock()
	r.claims[c.Partition] = c
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.claims, c.Partition)
		r.mu.Unlock()
	}()
	ctx := c.Context()
	failures := 0 // exits in a row, for the backoff
	failed := streak{max: r.o.maxFailures, longRun: r.o.restartMax}
	for again := false; ; again = true {
		select {
		case <-r.force:
			return nil
		default:
		}
		if again {
			r.metric.restarted()
		}
		began := time.Now()
		p, outs, err := r.start(c)
		if err != nil {
			r.log.Error("starting the child failed", "partition", c.Partition, "err", err)
			r.metric.ended(nil, true)
		} else {
			if !r.wait(c, p) {
				flush(outs)
				return nil
			}
			flush(outs)
			if time.Since(began) >= r.o.restartMax {
				failures = 0
			}
		}
		failures++
		how, ok := "the child could not be started: "+fmt.Sprint(err), false
		if p != nil {
			how = p.Describe()
			code, sig := p.Status()
			ok = code == 0 && sig == 0
		}
		if failed.exited(ok, time.Since(began)) {
			r.log.Warn("child failed too many times in a row; giving the partition back", "partition", c.Partition, "epoch", c.Epoch,
				"how", how, "failures_in_a_row", failed.n, "max_failures", r.o.maxFailures)
			r.metric.gaveBack()
			return fmt.Errorf("partition %s: child failed %d times in a row, last %s: %w", c.Partition, failed.n, how, herd.ErrGiveBack)
		}
		d := r.backoff(failures)
		level := slog.LevelWarn
		if ok {
			level = slog.LevelInfo // exit status 0: the child did its work
		}
		r.log.Log(ctx, level, "child exited; starting it again", "partition", c.Partition, "epoch", c.Epoch,
			"how", how, "exits_in_a_row", failures, "after", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.force:
			t.Stop()
			return nil
		}
	}
}

// cpuPeriod is how often at most a child's CPU time is read for its
// partition's load (Claim.ReportLoad): the CPU seconds its process group
// used per second over the period; half of --load-interval if that is
// shorter. The member publishes it every --load-interval.
const cpuPeriod = 10 * time.Second

// wait waits for the claim's child p to exit (true) or to be stopped
// because the claim ended or a second signal came (false), reporting the
// CPU its process group uses as the partition's load meanwhile.
func (r *runner) wait(c *herd.Claim, p *child.Process) bool {
	tick := time.NewTicker(max(r.cpuEvery, time.Second))
	defer tick.Stop()
	last, lastAt := time.Duration(-1), time.Now()
	for {
		select {
		case <-tick.C:
			if r.cpu == nil {
				continue
			}
			used, err := r.cpu.Group(p.Pid())
			if err != nil {
				r.cpuErr.Do(func() {
					r.log.Warn("cannot measure the children's CPU time: loads are the rate of checkpoints", "err", err)
				})
				continue
			}
			now := time.Now()
			if last >= 0 && used >= last {
				c.ReportLoad((used - last).Seconds() / now.Sub(lastAt).Seconds())
			}
			last, lastAt = used, now
		case <-p.Done():
			r.metric.ended(p, true)
			return true
		case <-c.Context().Done():
			r.stop(c, p)
			r.metric.ended(p, false)
			return false
		case <-r.force:
			p.Stop(0)
			r.metric.ended(p, false)
			return false
		}
	}
}

// stop ends the child of a claim whose context was cancelled. A handoff (or
// a Leave) gives it --max-shutdown after SIGTERM. A session that has ended
// (fenced on the local clock, expired in the store, or the member stopped)
// kills it at once, before or during that grace: another member may start
// the partition as soon as the store expires the session.
func (r *runner) stop(c *herd.Claim, p *child.Process) {
	stopChild(r.log, p, r.o.maxShutdown, c.SessionDone(), c.SessionCause, r.force, "partition", c.Partition)
}

// start starts the claim's child with its arguments and environment.
func (r *runner) start(c *herd.Claim) (*child.Process, []*child.Lines, error) {
	epoch := strconv.FormatUint(c.Epoch, 10)
	args := make([]string, len(r.o.args))
	for i, a := range r.o.args {
		args[i] = strings.NewReplacer("{partition}", c.Partition, "{epoch}", epoch).Replace(a)
	}
	env := make([]string, 0, len(os.Environ())+8)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HERD_PARTITION", "HERD_EPOCH", "HERD_CHECKPOINT", "HERD_CHECKPOINT_BASE64", "HERD_SOCKET", "HERD_GROUP", "HERD_MEMBER":
			continue // set below, or not at all
		}
		env = append(env, kv)
	}
	cp := c.LastCheckpoint()
	env = append(env,
		"HERD_PARTITION="+c.Partition, "HERD_EPOCH="+epoch,
		"HERD_CHECKPOINT_BASE64="+base64.StdEncoding.EncodeToString(cp),
		"HERD_SOCKET="+r.sock, "HERD_GROUP="+r.group, "HERD_MEMBER="+r.member)
	if utf8.Valid(cp) && !strings.ContainsRune(string(cp), 0) {
		env = append(env, "HERD_CHECKPOINT="+string(cp))
	}
	prefix := "[" + c.Partition + "] "
	outs := []*child.Lines{child.NewLines(r.out, &r.outMu, prefix), child.NewLines(r.errOut, &r.errMu, prefix)}
	p, err := child.Start(child.Spec{Shim: r.shim, Args: args, Env: env, Stdout: outs[0], Stderr: outs[1]})
	if err != nil {
		return nil, nil, err
	}
	r.metric.started()
	r.log.Info("child started", "partition", c.Partition, "epoch", c.Epoch, "pid", p.Pid())
	return p, outs, nil
}

func flush(outs []*child.Lines) {
	for _, l := range outs {
		l.Flush()
	}
}
