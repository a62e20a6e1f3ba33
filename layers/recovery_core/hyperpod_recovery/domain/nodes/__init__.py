"""A node through a recovery: which nodes may be touched, their repair ladder and health gate, the
replacement's results, and whether the repaired nodes came back (Slurm and EKS)."""
