"""What comes in: each source's event turned into a request, whether it is fresh enough to act on,
and the execution name that makes its recovery happen once."""
