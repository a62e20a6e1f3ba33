"""The operator's tools: the ``hyperpod-recovery`` command (preflight, drill, checkpoint, breaker).

They run on an operator's machine with the operator's credentials, never in the Lambda functions, so
they live outside the Lambda layer (layers/recovery_core is its ContentUri) and import the core
package (``hyperpod_recovery``) only for the models, errors and adapters they share with it.
"""

PROG = "hyperpod-recovery"  # the console script's name, as every message begins
