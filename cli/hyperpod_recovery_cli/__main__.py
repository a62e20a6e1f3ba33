"""``python -m hyperpod_recovery_cli``: the same as the ``hyperpod-recovery`` command."""

import sys

from hyperpod_recovery_cli.main import main

sys.exit(main())
