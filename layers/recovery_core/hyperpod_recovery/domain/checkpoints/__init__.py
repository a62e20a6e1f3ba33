"""The newest verified checkpoint under a job's prefix (the writer is in training/)."""
