"""``full_metric.training``, the import path users write, is the face :mod:`full_metric.faces.training`
itself (the same module object, so its names, private ones included, are one)."""

import sys

from .faces import training

sys.modules[__name__] = training
