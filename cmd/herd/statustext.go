package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ANSI colours of the status table. Every cell of a coloured column gets
// an escape of the same length before and after it (colour codes are all
// five bytes, the reset four), so tabwriter, which counts them as text,
// still aligns the columns.
const (
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiRed     = "\x1b[31m"
	ansiMagenta = "\x1b[35m"
	ansiPlain   = "\x1b[39m" // the default colour: for uncoloured cells of a coloured column
	ansiReset   = "\x1b[0m"
)

// stateColour is the colour of a partition state.
func stateColour(state string) string {
	switch state {
	case stateRunning:
		return ansiGreen
	case stateReleased:
		return ansiYellow
	case stateUnowned:
		return ansiRed
	case stateMalformed:
		return ansiMagenta
	}
	return ansiPlain
}

// textStyle is how the text report is written.
type textStyle struct {
	colour bool
}

// paint wraps s in colour c when colour is on.
func (ts textStyle) paint(c, s string) string {
	if !ts.colour {
		return s
	}
	return c + s + ansiReset
}

// writeText writes the report as aligned tables, one section per group.
func writeText(w io.Writer, r *statusReport, ts textStyle) error {
	var b strings.Builder
	if len(r.Groups) == 0 {
		fmt.Fprintf(&b, "no groups in %s\n", r.Store)
	}
	for i, g := range r.Groups {
		if i > 0 {
			b.WriteString("\n")
		}
		if g.Jobs != nil {
			writeJobsGroup(&b, g, ts, r.Time)
		} else {
			writeGroup(&b, g, ts)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGroup(b *strings.Builder, g groupStatus, ts textStyle) {
	c := g.Counts
	fmt.Fprintf(b, "group %s: %s, %s", g.Group, plural(c.Partitions, "partition"), ts.paint(stateColour(stateRunning), fmt.Sprintf("%d running", c.Running)))
	for _, x := range []struct {
		n     int
		state string
	}{{c.Released, stateReleased}, {c.Unowned, stateUnowned}, {c.Malformed, stateMalformed}} {
		if x.n > 0 {
			b.WriteString(", " + ts.paint(stateColour(x.state), fmt.Sprintf("%d %s", x.n, x.state)))
		}
	}
	if c.GivenBack > 0 {
		fmt.Fprintf(b, ", %d given back", c.GivenBack)
	}
	fmt.Fprintf(b, "; %s", plural(len(g.Members), "member"))
	if c.OutsideSet > 0 {
		fmt.Fprintf(b, "; %s of partitions outside the set", plural(c.OutsideSet, "record"))
	}
	b.WriteString("\n")
	if !g.PartitionSetStored {
		b.WriteString("no partition set is stored: members started with a set (herd run --partitions) write it; or use herd partitions set\n")
	}
	if g.Error != nil {
		fmt.Fprintf(b, "error: %s\n", *g.Error)
	}

	writeMembers(b, g, "PARTITIONS")
	if len(g.Partitions) > 0 {
		b.WriteString("\n")
		t := newTable()
		tw := t.tw
		loadCol := ""
		if g.loads {
			loadCol = "LOAD\t"
		}
		fmt.Fprintf(tw, "PARTITION\t%s\tMEMBER\tEPOCH\t%sCLAIMED\tCHECKPOINT\tNOTE\n", ts.paint(ansiPlain, "STATE"), loadCol)
		for _, p := range g.Partitions {
			epoch := "-"
			if p.Epoch != nil {
				epoch = fmt.Sprint(*p.Epoch)
			}
			member := "-"
			if p.Member != nil && *p.Member != "" {
				member = *p.Member
			}
			claimed := "-"
			if p.SinceMS != nil {
				claimed = fmtMS(p.SinceMS) + " ago"
			}
			ckpt := "-"
			if p.CheckpointBytes != nil {
				ckpt = fmtBytes(*p.CheckpointBytes)
				if p.CheckpointAgeMS != nil {
					ckpt += ", " + fmtMS(p.CheckpointAgeMS) + " ago"
				}
			}
			note := p.Reason
			if p.GivenBackBy != nil {
				gb := "given back by " + *p.GivenBackBy + ": kept off it while its session lives"
				if note != "" {
					gb = "; " + gb
				}
				note += gb
			}
			load := ""
			if g.loads {
				load = fmtLoad(p.Load) + "\t"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s%s\t%s\t%s\n", p.Partition, ts.paint(stateColour(p.State), p.State), member, epoch,
				load, claimed, ckpt, note)
		}
		t.writeTo(b)
	}
	if g.NotListed > 0 {
		what := "running partitions"
		if g.Listed == listedNotRunning && g.Counts.Running+g.Counts.OutsideSet < g.NotListed {
			what = "partitions"
		}
		fmt.Fprintf(b, "(%d more %s not listed; --all lists every one)\n", g.NotListed, what)
	}
	writeMalformed(b, g)
}

// writeMembers writes the group's member table, if it has members; last
// names its last column.
func writeMembers(b *strings.Builder, g groupStatus, last string) {
	if len(g.Members) > 0 {
		b.WriteString("\n")
		t := newTable()
		tw := t.tw
		loadCol := ""
		if g.loads {
			loadCol = "LOAD\t"
		}
		fmt.Fprintln(tw, "MEMBER\tSESSION\tWEIGHT\tTTL LEFT\tOWNED\t"+loadCol+last)
		for _, m := range g.Members {
			owned := compactIDs(m.owned, 60)
			if len(m.owned) == 0 {
				owned = "-"
			}
			load := ""
			if g.loads {
				load = fmtLoad(m.Load) + "\t"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s%s\n", m.Member, m.Session, m.Weight,
				fmtAge(time.Duration(m.TTLLeftMS)*time.Millisecond), m.Owned, load, owned)
		}
		t.writeTo(b)
	}
}

// writeMalformed lists the records the store could not decode.
func writeMalformed(b *strings.Builder, g groupStatus) {
	if len(g.Malformed) > 0 {
		b.WriteString("\nmalformed records (left out; members log each once):\n")
		for _, m := range g.Malformed {
			fmt.Fprintf(b, "  %s %q: %s\n", m.Kind, m.ID, m.Reason)
		}
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%s %ss", commas(n), what)
}

// fmtMS formats an optional duration in milliseconds.
func fmtMS(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return fmtAge(time.Duration(*ms) * time.Millisecond)
}

// fmtAge formats a duration for people, to about three digits: 850ms,
// 4.2s, 3m05s, 2h07m, 3d04h.
func fmtAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// fmtBytes formats a size: 12 B, 3.4 KiB, 1.0 MiB.
func fmtBytes(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// compactIDs writes ids as the status sorts them, runs of consecutive
// numbers as ranges (0-7,9,eu), cut to about width bytes with a count of the
// ids left out.
func compactIDs(ids []string, width int) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		lo, isNum := decimal(ids[i])
		j := i + 1
		for isNum && j < len(ids) {
			if n, ok := decimal(ids[j]); !ok || n != lo+(j-i) {
				break
			}
			j++
		}
		tok := ids[i]
		if j-i >= 2 {
			tok = fmt.Sprintf("%d-%d", lo, lo+(j-i-1))
		}
		if b.Len() > 0 && b.Len()+1+len(tok) > width {
			fmt.Fprintf(&b, ",… (%d more)", len(ids)-i)
			break
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(tok)
		i = j
	}
	return b.String()
}

// table is a tabwriter over a buffer whose lines lose the spaces tabwriter
// leaves after an empty last cell.
type table struct {
	buf strings.Builder
	tw  *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

// writeTo flushes the table into b.
func (t *table) writeTo(b *strings.Builder) {
	_ = t.tw.Flush()
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		if body, ok := strings.CutSuffix(line, "\n"); ok {
			b.WriteString(strings.TrimRight(body, " ") + "\n")
		} else {
			b.WriteString(line)
		}
	}
}

// fmtLoad shows a published load with three significant digits, "-" if
// none.
func fmtLoad(l *float64) string {
	if l == nil {
		return "-"
	}
	return strconv.FormatFloat(*l, 'g', 3, 64)
}
