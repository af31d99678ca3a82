"""Replies on the same topic from another conversation: every turn of a set of dialogs indexed by the
words of the turns it answers (TF-IDF, scikit-learn), so that a context finds the reply a person gave to
the most similar turns of a *different* dialog. The hard negative of the ``topic`` corruption and the
gaming probe's same-topic answer: fluent, specific, on the subject, and yet not a reply to this turn.

Why scikit-learn and not a hand-written retrieval: its ``TfidfVectorizer`` (English stop words left
out, sublinear term frequencies) and sparse products are the well-kept version of exactly this."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import UsageError, install_hint

#: Queries compared with the index at a time (bounds the dense similarity block to this many rows).
CHUNK = 256
#: The turns a reply is keyed by: the last two before it (a single short turn says little of a topic).
SPAN = 2


def topic_key(turns: Sequence[str]) -> str:
    """The text a reply to ``turns`` is found by: their last :data:`SPAN` turns."""
    return " ".join(turns[-SPAN:])


class TopicIndex:
    """Each turn but the first of ``dialogs``, keyed by the turns before it (:func:`topic_key`; its dialog
    remembered)."""

    def __init__(self, dialogs: Sequence[Sequence[str]]) -> None:
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
        except ImportError:
            raise UsageError(f"same-topic replies need scikit-learn: {install_hint('adapt', 'scikit-learn')}") from None
        keys, self.replies, owners = [], [], []
        for j, dialog in enumerate(dialogs):
            for m in range(len(dialog) - 1):
                keys.append(topic_key(dialog[: m + 1]))
                self.replies.append(dialog[m + 1])
                owners.append(j)
        if not keys or len(set(owners)) < 2:
            raise UsageError("same-topic replies need at least two dialogs of two turns or more")
        self.owners = np.asarray(owners)
        self.vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform(keys)

    def replies_to(self, contexts: Sequence[Sequence[str]], dialogs: Sequence[int]) -> list[str | None]:
        """For each context, the reply to the most similar indexed key (:func:`topic_key`) whose dialog
        is not ``dialogs[i]`` (the first on a tie); ``None`` where no key of another dialog shares a word."""
        found: list[str | None] = []
        for start in range(0, len(contexts), CHUNK):
            query = self.vectorizer.transform([topic_key(c) for c in contexts[start : start + CHUNK]])
            similarity = (query @ self.matrix.T).toarray()
            for row, own in zip(similarity, dialogs[start : start + CHUNK]):
                row[self.owners == own] = -1.0
                best = int(np.argmax(row))
                found.append(self.replies[best] if row[best] > 0 else None)
        return found
