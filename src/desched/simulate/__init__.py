"""A simulation and what it says: per-node utilization frames and balance (`frames`), what a
run says once before its first cycle (`preflight`), the cycles over a snapshot (`simulation`),
the answers to what-if questions (`whatif`) and `desched explain` (`explain`)."""
