"""The one Logger and Metrics instance every handler shares (service and namespace come from
POWERTOOLS_SERVICE_NAME / POWERTOOLS_METRICS_NAMESPACE set in template.yaml Globals)."""

import warnings

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
metrics = Metrics()

# Several steps emit no metric on a given invocation; that is expected, not worth a warning each time.
warnings.filterwarnings("ignore", message="No application metrics to publish")
