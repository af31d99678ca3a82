"""Named presets found by the settings study (``full-metric study``, reports/study/report.md)."""

from __future__ import annotations

from typing import Any

#: Filled from the study's results: per model family, the configuration chosen on the three
#: development sets.
STUDY_PRESETS: dict[str, dict[str, Any]] = {}
