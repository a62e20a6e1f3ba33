"""At-risk signals: a node that has not failed yet, named by a precursor (docs/runbook.md "At-risk
signals"). Pure: parse each source into a SignalReport, judge it into an AtRiskVerdict, settle its
outcome and score each signal from the ledger.

* ``signals``: what every source is read into (SignalReport), the refusal (UnreadableSignal).
* ``alertmanager``: an Amazon Managed Service for Prometheus alert manager message (JSON template).
* ``cloudwatch``: a CloudWatch alarm's notification (SNS) or its state change (EventBridge).
* ``settings``: each signal's mode, prior failure chance and horizon (template parameter AtRiskSignals).
* ``judge``: a report -> a verdict (its id, its failure chance: measured precision or prior).
* ``outcomes``: whether the node failed within the horizon; precision and recall per signal.
* ``history``: the ledger's own node history (signal node_history).
* ``kubernetes``: EKS node conditions and events that carry a fault without a repair.
"""
