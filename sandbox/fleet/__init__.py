"""The fleet drill: a seeded failure trace of a whole cluster over days, run through the real
pipeline in the sandbox (sandbox/runner/), and what it cost the jobs and the operators."""
