"""``python -m full_metric``: the command line, as ``torchrun`` and ``accelerate launch`` start it."""

import sys

from .cli import main

sys.exit(main())
