"""The safety policy evaluated before anything destructive, and AWS's hard limits the parameters
are derived from."""
