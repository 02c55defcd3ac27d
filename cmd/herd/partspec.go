package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/herdhq/herd/store"
)

// maxRunPartitions bounds the partition set of herd run: one child process
// per partition owned, and the whole set is written to the store at join.
const maxRunPartitions = 100_000

// parsePartitions parses --partitions of herd run: a comma-separated list of
// ids and ranges ("0-31", "a,b,c", "0-3,x"), or "@file" with one id per line
// (blank lines and lines starting with # are skipped, surrounding spaces are
// trimmed). A range is two decimal numbers without leading zeros, the first
// not above the second; anything else is an id as written. Ids must be unique.
func parsePartitions(spec string) ([]store.Partition, error) {
	ps, err := parsePartitionSpec("--partitions", spec)
	if err == nil && len(ps) == 0 {
		return nil, fmt.Errorf("--partitions %s: no partition", spec)
	}
	return ps, err
}

// parsePartitionSpec is parsePartitions for any command: what names the
// spec in messages ("--partitions", "SPEC"). An empty spec, or a file with
// no id, is an empty set, which the caller refuses or allows.
func parsePartitionSpec(what, spec string) ([]store.Partition, error) {
	return parseIDSpec(what, "partition", spec)
}

// parseIDSpec is parsePartitionSpec for ids that are each a noun
// ("partition", "key") in messages.
func parseIDSpec(what, noun, spec string) ([]store.Partition, error) {
	var ids []string
	var weights map[string]int // from an @file's "ID<TAB>WEIGHT" lines; 1 if absent
	if name, ok := strings.CutPrefix(spec, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			id := strings.TrimSpace(sc.Text())
			if id == "" || strings.HasPrefix(id, "#") {
				continue
			}
			id, w, err := idWeight(noun, id)
			if err != nil {
				return nil, fmt.Errorf("%s %s line %d: %w", what, spec, n, err)
			}
			if err := store.ValidateID(noun, id); err != nil {
				return nil, fmt.Errorf("%s %s line %d: %w", what, spec, n, err)
			}
			if w != 1 {
				if weights == nil {
					weights = map[string]int{}
				}
				weights[id] = w
			}
			ids = append(ids, id)
			if len(ids) > maxRunPartitions {
				return nil, fmt.Errorf("%s %s: more than %s %ss", what, spec, commas(maxRunPartitions), noun)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, spec, err)
		}
	} else if spec != "" { // "" is no partition, not one empty id
		for item := range strings.SplitSeq(spec, ",") {
			lo, hi, ok := numRange(item)
			if !ok {
				if err := store.ValidateID(noun, item); err != nil {
					return nil, fmt.Errorf("%s: %w; write ids and ranges separated by commas (0-31,a,b) or @file", what, err)
				}
				ids = append(ids, item)
				continue
			}
			if hi < lo {
				return nil, fmt.Errorf("%s: range %q ends before it starts", what, item)
			}
			if hi-lo >= int64(maxRunPartitions-len(ids)) {
				return nil, fmt.Errorf("%s: more than %s %ss", what, commas(maxRunPartitions), noun)
			}
			if hi > maxRangeBound {
				return nil, fmt.Errorf("%s: range %q: a bound above %s; number %ss from 0 up (or write the ids themselves)", what, item, commas(maxRangeBound), noun)
			}
			for i := lo; i <= hi; i++ {
				ids = append(ids, strconv.FormatInt(i, 10))
			}
		}
	}
	ps := make([]store.Partition, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("%s: %q appears twice", what, id)
		}
		seen[id] = true
		ps[i] = store.Partition{ID: id, Weight: 1}
		if w, ok := weights[id]; ok {
			ps[i].Weight = w
		}
	}
	return ps, nil
}

// maxWeight is the largest weight an @file gives a partition.
const maxWeight = 1_000_000

// idWeight splits a line of an @file into its id and weight: "ID" (weight
// 1) or "ID<TAB>WEIGHT". An id holds no control character, so a tab cannot
// be part of one, whatever else it holds (':' and '=' included).
func idWeight(noun, line string) (string, int, error) {
	id, w, ok := strings.Cut(line, "\t")
	if !ok {
		return line, 1, nil
	}
	if noun != "partition" {
		return "", 0, fmt.Errorf("a tab after %q: a %s has no weight (one id per line)", abbrevID(id), noun)
	}
	id, w = strings.TrimSpace(id), strings.TrimSpace(w)
	n, err := strconv.Atoi(w)
	if err != nil || n < 1 || n > maxWeight {
		return "", 0, fmt.Errorf("partition %q: weight %q is not a whole number from 1 to %s (write ID<TAB>WEIGHT)", abbrevID(id), abbrevID(w), commas(maxWeight))
	}
	return id, n, nil
}

// abbrevID shortens an id quoted in a message.
func abbrevID(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "..."
	}
	return s
}

// maxRangeBound is the largest bound of a range.
const maxRangeBound = 999_999_999

// numRange parses "lo-hi" made of two decimal numbers without leading
// zeros. A number too long for an int64 reads as math.MaxInt64, so that a
// range with a bound of many digits is refused as too large rather than
// taken for an id.
func numRange(s string) (lo, hi int64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	lo, okA := bigDecimal(a)
	hi, okB := bigDecimal(b)
	return lo, hi, okA && okB
}

// bigDecimal is decimal for numbers of any length: one above
// math.MaxInt64 reads as math.MaxInt64.
func bigDecimal(s string) (int64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.MaxInt64, true // only digits: out of range
	}
	return n, true
}

func decimal(s string) (int, bool) {
	if len(s) > 9 {
		return 0, false
	}
	n, ok := bigDecimal(s)
	return int(n), ok
}

// formatSpec writes ids as a partition spec that parsePartitionSpec reads
// back as the same ids, in the same order: runs of consecutive decimal ids
// (without leading zeros) as ranges, the rest as written. An id holding a
// comma, or one that would read as a range, cannot be written in a spec;
// ok is false then (write the ids to a file, one per line, instead).
func formatSpec(ids []string) (spec string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(ids); {
		if strings.Contains(ids[i], ",") || strings.HasPrefix(ids[i], "@") && i == 0 {
			return "", false
		}
		if _, _, isRange := numRange(ids[i]); isRange {
			return "", false
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		lo, isNum := decimal(ids[i])
		j := i + 1
		for isNum && j < len(ids) {
			n, ok := decimal(ids[j])
			if !ok || n != lo+(j-i) {
				break
			}
			j++
		}
		if j-i >= 2 {
			fmt.Fprintf(&b, "%d-%d", lo, lo+(j-i-1))
		} else {
			b.WriteString(ids[i])
		}
		i = j
	}
	return b.String(), true
}

// specWarning is the warning for a --partitions SPEC that looks like a
// count or a typo: a single id, not a range nor a file ("" if none).
func specWarning(flag, spec string) string {
	if flag == "" {
		flag = "--partitions"
	}
	if spec == "" || strings.HasPrefix(spec, "@") || strings.Contains(spec, ",") {
		return ""
	}
	if _, _, isRange := numRange(spec); isRange {
		return ""
	}
	if n, ok := decimal(spec); ok {
		if n == 0 {
			return "" // partition "0": no count means zero
		}
		return fmt.Sprintf("%s %s is one partition, named %q, not a count of partitions: did you mean 0-%d?", flag, spec, spec, n-1)
	}
	return fmt.Sprintf("%s %q is a set of one partition, named %q: write ids and ranges separated by commas (0-31, a,b,c) or @file", flag, spec, spec)
}
