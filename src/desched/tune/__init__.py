"""`desched tune`: the balance settings that meet a goal with the fewest evictions, found by
simulating candidates of the user's policy, and the floor no policy can beat."""
