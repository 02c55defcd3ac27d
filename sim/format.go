package sim

import (
	"fmt"
	"strings"
	"time"
)

// fmtDur formats a duration for the table: "never" for -1, milliseconds
// below a second, seconds with one decimal up to 10 minutes, "12m03s" above.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "never"
	case d == 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Minute:
		s := fmt.Sprintf("%.1fs", d.Seconds())
		return strings.Replace(s, ".0s", "s", 1)
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
