import sys

from hyperpod_recovery_agent.cli import main

sys.exit(main())
