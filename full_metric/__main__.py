"""``python -m full_metric``: the command line, as ``torchrun`` and ``accelerate launch`` start it."""

import sys

from .faces.cli import main

sys.exit(main())
