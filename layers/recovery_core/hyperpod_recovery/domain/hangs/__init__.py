"""Faults that do not announce themselves: a job that stops making progress (a hang) or slows down
(fail-slow), seen in the progress its nodes report (models/progress.py).

* ``rules``: the detectors' settings and modes (template parameters Hang*).
* ``detect``: per job, a stall or slowdown verdict, or none (pure).
* ``handled``: whether a stall is another incident's to end (a claim on the job's resubmission).
* ``suspects``: which nodes to blame, from progress and from the hang's evidence.
* ``pod_logs``: an EKS job's evidence from its pods' logs and events (texts, signatures; pure).
"""
