package dashboard

// Refreshers is how many groups' refreshers are running.
func Refreshers(h *Handler) int { return int(h.refreshers.Load()) }
