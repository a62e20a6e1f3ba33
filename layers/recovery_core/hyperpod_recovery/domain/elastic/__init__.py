"""Shrink-and-continue: which sizes a job may run at (sizes.py), whether to shrink now or
wait for the replacement (decide.py), and when a shrunk job grows back (grow_back.py). Pure."""
