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

// Improves reports whether byLoad (AssignLoad's target) leaves the most
// loaded member lower than byCount (AssignSorted's) does, relative to
// capacity, by more than AssignLoad's trigger distance max(Band x bound,
// Floor) (bound as Spread's; o's defaults as AssignLoad's).
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
	return tc-tl > max(band*bound, floor)
}
