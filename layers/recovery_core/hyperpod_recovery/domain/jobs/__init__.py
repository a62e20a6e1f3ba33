"""A training job through a recovery: why it failed and whether it may restart, and on EKS who owns
and restarts it, which Kueue API to speak and how long a stopped job's pods may run on; and an
incident's resume plan (which checkpoint each job resumes from, when, at what size)."""
