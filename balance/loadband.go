package balance

import "math"

// Spread returns, for target (an assignment of partitions to members as
// AssignSorted returns it: target[i] is the index in members of
// partitions[i]'s member, or -1), the most loaded member's load over its
// capacity, top, and the lower bound of what any assignment can reach,
// bound = max(total load / total capacity, hottest partition's load /
// largest capacity). Loads are AssignLoad's (Weight x load[i]; load nil:
// every load is 1).
func Spread(members []Member, partitions []Partition, target []int32, load []float64) (top, bound float64) {
	if len(members) == 0 || len(target) != len(partitions) || load != nil && len(load) != len(partitions) {
		return 0, 0
	}
	e, _ := effectiveLoads(partitions, load)
	sum := make([]float64, len(members))
	var total, hottest float64
	for i, t := range target {
		total += e[i]
		hottest = max(hottest, e[i])
		if t >= 0 && int(t) < len(members) {
			sum[t] += e[i]
		}
	}
	var capTotal, capMax float64
	for i, m := range members {
		c := float64(max(m.Weight, 1))
		capTotal += c
		capMax = max(capMax, c)
		top = max(top, sum[i]/c)
	}
	return top, max(total/capTotal, hottest/capMax)
}

// Improves reports whether byLoad (AssignLoad's target) does clearly
// better than byCount (AssignSorted's), by either of two measures, each
// relative to capacity and by more than AssignLoad's trigger distance
// (o's defaults as AssignLoad's):
//
//   - the most loaded member is lower, by more than max(Band x bound,
//     Floor) (bound as Spread's);
//   - among the members that hold no partition hotter than a fair share
//     (total load / total capacity x the member's capacity), the most
//     loaded is lower, by more than max(Band x their mean, Floor): one hot
//     partition alone on a member must not hide a bad spread of the rest.
//
// A member uses it to keep the count balance while the balance by load
// would not do clearly better: loads that differ a little (measured rates
// of equal work, noise), or partitions too few to spread finer than one
// per member, leave partitions where the count balance puts them.
func Improves(members []Member, partitions []Partition, byCount, byLoad []int32, load []float64, o LoadOptions) bool {
	tc, bound := Spread(members, partitions, byCount, load)
	tl, _ := Spread(members, partitions, byLoad, load)
	band := o.Band
	if !(band > 0) || math.IsInf(band, 0) {
		band = defaultBand
	}
	floor := o.Floor
	if math.IsNaN(floor) || math.IsInf(floor, 0) || floor < 0 {
		floor = 0
	}
	if tc-tl > max(band*bound, floor) {
		return true
	}
	rc, mc := restSpread(members, partitions, byCount, load)
	rl, _ := restSpread(members, partitions, byLoad, load)
	return rc-rl > max(band*mc, floor)
}

// restSpread is the most loaded member's load over its capacity, and the
// mean, among the members that hold no partition hotter than a fair share
// under target (0, 0 if there is none).
func restSpread(members []Member, partitions []Partition, target []int32, load []float64) (top, mean float64) {
	if len(members) == 0 || len(target) != len(partitions) || load != nil && len(load) != len(partitions) {
		return 0, 0
	}
	e, _ := effectiveLoads(partitions, load)
	var total, capTotal float64
	for _, x := range e {
		total += x
	}
	for _, m := range members {
		capTotal += float64(max(m.Weight, 1))
	}
	fair := total / capTotal
	sum := make([]float64, len(members))
	hot := make([]bool, len(members))
	for i, t := range target {
		if t < 0 || int(t) >= len(members) {
			continue
		}
		sum[t] += e[i]
		if e[i] > fair*float64(max(members[t].Weight, 1)) {
			hot[t] = true
		}
	}
	var rest, restCap float64
	for i, m := range members {
		if hot[i] {
			continue
		}
		c := float64(max(m.Weight, 1))
		rest += sum[i]
		restCap += c
		top = max(top, sum[i]/c)
	}
	if restCap == 0 {
		return 0, 0
	}
	return top, rest / restCap
}
