"""A planned swap: move a job off a node at risk right after its next verified checkpoint commit, when the
expected cost says so (cost.py: the one rule the swap workflow, the goodput planner and the fleet report use). Pure."""
