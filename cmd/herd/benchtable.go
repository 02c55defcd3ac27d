package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func printBenchTable(out io.Writer, rs []benchResult) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tstore\tpartitions\tmembers\tbalanced after\tsettled after\tmoves\tmin moves\tmax owners at once\tops/member\trows read/member\tserver CPU\tCPU/process p50\tmax\tpeak RSS\tjoin failures\t")
	var steady, jobs, skewed []benchResult
	for _, r := range rs {
		if r.StoreOpsPerMemberPerSecond != nil {
			steady = append(steady, r)
		}
		if r.Jobs != nil {
			jobs = append(jobs, r)
		}
		if r.Skewed != nil {
			skewed = append(skewed, r)
		}
		cpu := "-"
		if r.ServerCPUSeconds != nil {
			cpu = fmt.Sprintf("%.3fs", *r.ServerCPUSeconds)
		}
		p50, pmax, rss, fails := "-", "-", "-", "-"
		if r.MemberProcesses && r.Jobs == nil {
			p50, pmax = fmt.Sprintf("%.3fs", r.MemberCPUSecondsP50), fmt.Sprintf("%.3fs", r.MemberCPUSecondsMax)
			rss, fails = mib(r.MemberPeakRSSBytesMax), fmt.Sprint(r.JoinFailures)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d→%d\t%.3fs\t%.3fs\t%d\t%d\t%d\t%.1f\t%.0f\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Store, r.Partitions,
			r.MembersBefore, r.MembersAfter, r.SecondsToBalance, r.SecondsToSettle, r.Moves, r.MinMoves, r.MaxConcurrentOwners,
			r.StoreOpsPerMember, r.RowsReadPerMember, cpu, p50, pmax, rss, fails)
	}
	w.Flush()
	if len(rs) > 0 {
		fmt.Fprintf(out, "(session TTL %gs; settled: every member has read the change's last entry; ops, rows read and CPU are per member from the change until settled)\n", rs[0].SessionTTLSeconds)
	}
	for _, r := range steady {
		printSteadyLine(out, r)
	}
	for _, r := range jobs {
		printJobsLine(out, r)
	}
	for _, r := range skewed {
		printSkewedLine(out, r)
	}
}

func printSteadyLine(out io.Writer, r benchResult) {
	fmt.Fprintf(out, "\nsteady (%d members, %d partitions, balanced): %.3f store ops per member per second", r.MembersAfter, r.Partitions, *r.StoreOpsPerMemberPerSecond)
	if r.RenewalsPerMemberPerSecond != nil {
		fmt.Fprintf(out, " (%.3f renewals, %.3f others)", *r.RenewalsPerMemberPerSecond, *r.StoreOpsPerMemberPerSecond-*r.RenewalsPerMemberPerSecond)
	}
	if r.SteadyFullReads != nil {
		fmt.Fprintf(out, ", %d full reads", *r.SteadyFullReads)
	}
	fmt.Fprintf(out, ", %.2f%% of a core per member", *r.CPUSecondsPerMemberPerSec*100)
	if r.HeapBytesPerMember != nil {
		fmt.Fprintf(out, ", %s of heap per member", mib(*r.HeapBytesPerMember))
	}
	if r.MemberProcesses {
		fmt.Fprintf(out, ", peak RSS %s (the largest member process)", mib(r.MemberPeakRSSBytesMax))
	}
	fmt.Fprintln(out)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
