"""Dialogs to token ids, per model family: rendering of the turns, follow-up targets, truncation.

A renderer turns a dialog (a list of turns, the last one being the response under evaluation)
into a *context* text, and each follow-up into a *target* text. The model reads the context and
only the target's tokens are scored. The context does not depend on the follow-up, so one
context serves every follow-up of a dialog.

Renderings (``rendering=`` of :class:`~full_metric.FullScorer`):

- ``blenderbot``: BlenderBot's own format (its tokenizer's chat template): turns joined by two
  spaces, the turns of the speaker who spoke last prefixed by a space, ``</s>`` at the end.
  The follow-up is the model's reply, tokenised as a target with a leading space (BlenderBot's
  replies start with a space token) and ``</s>``.
- ``seq2seq``: other encoder-decoder models (BART, T5): turns joined by newlines; the follow-up
  is the decoder target as the tokenizer formats targets (``text_target=``).
- ``speaker``: decoder-only models: ``A: ...`` / ``B: ...`` lines, the response spoken by ``B``,
  the follow-up as ``A``'s next line (its text and the closing newline are scored).
- ``chat_template``: decoder-only models: the tokenizer's chat template, the response as the
  assistant's turn and the follow-up as the next user turn (its text and the end-of-turn token
  are scored; the turn header belongs to the context). A template that refuses a conversation
  opening with the assistant (Llama-2, Mistral, Gemma: "roles must alternate user/assistant")
  gets :data:`USER_FIRST_PLACEHOLDER` as the user's first turn when the dialog would open with
  the assistant; the signature then says ``render:chat_template+user-first``.
- ``plain``: turns joined by newlines, the follow-up as the next line.
- ``eos``: DialoGPT's format, every turn closed by the end-of-text token.
- ``reference``: the authors' package ``full`` 0.0.3.1: ``"\\t" + "\\t".join(turns)`` with a
  prefix space, truncated on the right at the tokenizer's maximum length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from .errors import UsageError

RENDERINGS = ("blenderbot", "seq2seq", "speaker", "chat_template", "plain", "eos", "reference")
ENCODER_DECODER_RENDERINGS = ("blenderbot", "seq2seq", "reference")
DECODER_ONLY_RENDERINGS = ("speaker", "chat_template", "plain", "eos")
_BLENDERBOT_TYPES = ("blenderbot", "blenderbot-small", "blenderbot_small")
_SENTINEL = "\x00FOLLOW-UP\x00"
#: A word, for "was the context read" (:meth:`Renderer.reads_context`): letters or digits, any script.
_WORD = re.compile(r"[^\W_]+")
#: The user's turn put first when a strict chat template would otherwise see a conversation open
#: with the assistant (an empty turn: it adds the template's markup and no words).
USER_FIRST_PLACEHOLDER = ""
#: How the signature's ``render:`` field names a rendering that put the placeholder first.
USER_FIRST_TAG = "+user-first"


def template_needs_user_first(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s chat template refuses a conversation that opens with the assistant
    (Llama-2-chat, Mistral-Instruct, Gemma raise "Conversation roles must alternate user/assistant/...")."""
    if not getattr(tokenizer, "chat_template", None):
        return False
    probe = [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi."}]
    try:
        tokenizer.apply_chat_template(probe, tokenize=False)
    except Exception:  # noqa: BLE001 - jinja's TemplateError from raise_exception, whatever the template says
        return True
    return False


def chat_messages(turns: Sequence[str], last_role: str, user_first: bool) -> list[dict[str, str]]:
    """The turns as alternating chat messages, the last one spoken by ``last_role`` (``"assistant"``
    or ``"user"``); with ``user_first``, :data:`USER_FIRST_PLACEHOLDER` as the user's first turn
    when the conversation would otherwise open with the assistant. The one rule for the judge's
    rendering and the trained model's prompt."""
    other = "user" if last_role == "assistant" else "assistant"
    last = len(turns) - 1
    messages = [{"role": last_role if (last - i) % 2 == 0 else other, "content": t} for i, t in enumerate(turns)]
    if user_first and messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": USER_FIRST_PLACEHOLDER})
    return messages


def default_rendering(
    model_type: str, name_or_path: str, is_encoder_decoder: bool, has_chat_template: bool = False
) -> str:
    """The rendering each model family was trained with (see the module docstring)."""
    if is_encoder_decoder:
        return "blenderbot" if model_type in _BLENDERBOT_TYPES else "seq2seq"
    if "dialogpt" in name_or_path.lower():
        return "eos"
    return "chat_template" if has_chat_template else "speaker"


@dataclass(frozen=True)
class EncodedDialog:
    """A dialog's context token ids, how many of its tokens truncation dropped, and whether the model
    reads any of its context (``False``: the last turn alone filled the budget, or was itself cut)."""

    context_ids: tuple[int, ...]
    dropped_tokens: int
    context_read: bool = True


def cut_whole_turns(ids: Any, turns: Sequence[str], max_tokens: int) -> tuple[list[int], int, int] | None:
    """The rendering ``ids(kept)`` of the newest whole turns that fit in ``max_tokens`` tokens, how many
    tokens the cut dropped and how many turns it kept (all of them when the dialog fits); ``None`` when
    not even the last turn fits. The one cut of a chat template, for the judge and the policy prompt."""
    full = ids(turns)
    if len(full) <= max_tokens:
        return full, 0, len(turns)
    kept = newest_turns_that_fit(ids, turns, max_tokens)
    if not kept:
        return None
    cut = ids(turns[len(turns) - kept :])
    return cut, len(full) - len(cut), kept


def newest_turns_that_fit(ids: Any, turns: Sequence[str], max_tokens: int) -> int:
    """The most newest turns whose rendering ``ids(turns[-k:])`` fits in ``max_tokens`` tokens, the
    dialog cut between whole turns (0: not even the last turn fits). Fewer turns never render longer,
    so a binary search finds it."""
    low, high = 0, len(turns)  # low fits (or is 0), the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if len(ids(turns[len(turns) - middle :])) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return low


def speaker_lines(turns: Sequence[str], next_speaker: str) -> str:
    """The ``speaker`` rendering: one ``A: ...`` / ``B: ...`` line per turn, speakers alternating so that
    the last turn is the other speaker's, then ``next_speaker:`` opening the next turn. The judge reads a
    dialog so (``A`` follows up on ``B``'s response); a policy without a chat template is prompted so
    (``B`` answers ``A``'s last turn)."""
    other = {"A": "B", "B": "A"}[next_speaker]
    last = len(turns) - 1
    return "\n".join([*(f"{other if (last - i) % 2 == 0 else next_speaker}: {t}" for i, t in enumerate(turns)),
                      f"{next_speaker}:"])


class Renderer:
    """Renders dialogs and follow-ups for one tokenizer and one rendering, and truncates.

    Args:
        tokenizer: the model's tokenizer.
        rendering: one of :data:`RENDERINGS`.
        is_encoder_decoder: whether the context feeds an encoder (else it prefixes the target).
    """

    def __init__(self, tokenizer: Any, rendering: str, is_encoder_decoder: bool):
        if rendering not in RENDERINGS:
            raise UsageError(f"unknown rendering {rendering!r}; choose one of {RENDERINGS}")
        family = ENCODER_DECODER_RENDERINGS if is_encoder_decoder else DECODER_ONLY_RENDERINGS
        if rendering not in family:
            kind = "an encoder-decoder" if is_encoder_decoder else "a decoder-only"
            raise UsageError(f"rendering {rendering!r} does not fit {kind} model; choose one of {family}")
        if rendering == "chat_template" and not getattr(tokenizer, "chat_template", None):
            raise UsageError("rendering 'chat_template' needs a tokenizer with a chat template")
        if rendering == "eos" and tokenizer.eos_token is None:
            raise UsageError("rendering 'eos' needs a tokenizer with an end-of-text token")
        self.tokenizer = tokenizer
        self.rendering = rendering
        self.is_encoder_decoder = is_encoder_decoder
        #: whether a dialog that would open with the assistant gets the user placeholder first
        self.user_first = rendering == "chat_template" and template_needs_user_first(tokenizer)
        self._target_cache: dict[str, tuple[int, ...]] = {}

    @property
    def tag(self) -> str:
        """The rendering as the signature names it (``chat_template+user-first`` when the placeholder is used)."""
        return self.rendering + (USER_FIRST_TAG if self.user_first else "")

    # -- text ---------------------------------------------------------------------------------
    def context_text(self, turns: Sequence[str]) -> str:
        """The text the model reads before the follow-up."""
        r = self.rendering
        if r == "blenderbot":
            last = len(turns) - 1
            return "  ".join((" " + t) if (last - i) % 2 == 0 else t for i, t in enumerate(turns))
        if r == "seq2seq":
            return "\n".join(turns)
        if r == "reference":
            return " \t" + "\t".join(turns)
        if r == "speaker":
            return speaker_lines(turns, "A")  # A follows up on B's response
        if r == "plain":
            return "".join(t + "\n" for t in turns)
        if r == "eos":
            return "".join(t + self.tokenizer.eos_token for t in turns)
        return self._chat_parts(turns)[0]

    def target_text(self, follow_up: str) -> str:
        """The scored text of a follow-up (before the tokenizer's own target formatting)."""
        r = self.rendering
        if r in ("blenderbot", "reference"):
            return " " + follow_up
        if r == "seq2seq":
            return follow_up
        if r == "speaker":
            return " " + follow_up + "\n"
        if r == "plain":
            return follow_up + "\n"
        if r == "eos":
            return follow_up + self.tokenizer.eos_token
        return follow_up + self._chat_parts(["."])[1]

    def _chat_parts(self, turns: Sequence[str]) -> tuple[str, str]:
        messages = chat_messages(turns, "assistant", self.user_first)
        messages.append({"role": "user", "content": _SENTINEL})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False)
        head, _, tail = text.rpartition(_SENTINEL)
        return head, tail

    # -- token ids ----------------------------------------------------------------------------
    def target_ids(self, follow_up: str) -> tuple[int, ...]:
        """The follow-up's scored token ids (cached per follow-up)."""
        if follow_up not in self._target_cache:
            self._target_cache[follow_up] = self._encode_target(follow_up)
        return self._target_cache[follow_up]

    def _encode_target(self, follow_up: str) -> tuple[int, ...]:
        text = self.target_text(follow_up)
        if self.is_encoder_decoder:
            return tuple(self.tokenizer(text_target=text)["input_ids"])
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if self.rendering == "chat_template":
            special = set(self.tokenizer.all_special_ids)
            cut = next((i + 1 for i, t in enumerate(ids) if t in special), len(ids))
            ids = ids[:cut]
        return tuple(ids)

    def encode(self, turns: Sequence[str], max_tokens: int) -> EncodedDialog:
        """Render and tokenise a dialog's context, keeping at most ``max_tokens`` tokens.

        Tokens beyond the budget are dropped from the start (the oldest turns), never the end;
        special tokens the tokenizer adds around the text stay. A chat template is cut between
        whole turns and rendered again, so its opening (BOS, system header) stays. The
        ``reference`` rendering cuts the end instead, as the authors' package did.

        Whether the model reads the context (``context_read``) is one rule for every rendering
        (:meth:`reads_context`); the ``reference`` rendering, which cuts the end, always reads it.
        """
        if self.rendering == "chat_template":
            return self._encode_whole_turns(turns, max_tokens)
        encoded = encode_text(self.tokenizer, self.context_text(turns), max_tokens, True,
                              keep="start" if self.rendering == "reference" else "end")
        if encoded.dropped_tokens and self.rendering != "reference":
            return EncodedDialog(encoded.context_ids, encoded.dropped_tokens,
                                 self.reads_context(turns, encoded.dropped_tokens))
        return encoded

    def reads_context(self, turns: Sequence[str], dropped: int) -> bool:
        """The one rule of "was the context read", for a dialog whose first ``dropped`` tokens were cut: the
        tokens kept hold at least one whole word of a context turn, not only the separator or speaker label
        after it, its closing punctuation or the end of a word cut in two (a chat template, cut between whole
        turns: a context turn kept whole). A dialog of one turn has no context: it is read when it was not
        cut. Where the tokenizer gives no character offsets (a slow one), the kept tokens must outnumber the
        last turn's rendering with an empty turn before it."""
        if len(turns) < 2:
            return dropped == 0
        text = self.context_text(turns)
        end = 0  # where the last context turn's text ends in the rendering
        for turn in turns[:-1]:
            end = (text.find(turn, end) if turn else end) + len(turn)
        try:
            offsets = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True,
                                     verbose=False)["offset_mapping"]
        except NotImplementedError:  # a slow tokenizer: by counting tokens, which counts markup as context
            return len(self.ids(turns)) - dropped > len(self.ids(["", turns[-1]]))
        if dropped >= len(offsets):
            return False
        first = offsets[dropped][0]
        words = [m for m in _WORD.finditer(text, first, end) if m.start() > first or first == 0
                 or not text[first - 1].isalnum()]  # the word the cut went through is not whole
        return bool(words)

    def ids(self, turns: Sequence[str]) -> list[int]:
        """A dialog's whole rendering as token ids, uncut (the tokens :meth:`encode` keeps the end of)."""
        if self.rendering == "chat_template":
            return list(self.tokenizer(self.context_text(turns), add_special_tokens=False, verbose=False)["input_ids"])
        return list(encode_text(self.tokenizer, self.context_text(turns), 1 << 62, True).context_ids)

    def _encode_whole_turns(self, turns: Sequence[str], max_tokens: int) -> EncodedDialog:
        found = cut_whole_turns(self.ids, turns, max_tokens)
        if found is None:  # not even the last turn fits: its end, and no context read
            cut = encode_text(self.tokenizer, self.context_text(turns), max_tokens, False)
            return EncodedDialog(cut.context_ids, cut.dropped_tokens, context_read=False)
        # the rule of reads_context, cut between whole turns: a context turn kept beside the last one
        return EncodedDialog(tuple(found[0]), found[1], context_read=found[2] > 1 or len(turns) == 1)


def encode_text(tokenizer: Any, text: str, max_tokens: int, add_special_tokens: bool, keep: str = "end") -> EncodedDialog:
    """Tokenise ``text`` keeping at most ``max_tokens`` tokens: its end (``keep="end"``: the oldest
    tokens dropped, the newest turn kept) or its start (``"start"``: the ``reference`` rendering's
    cut on the right). Special tokens the tokenizer adds around the text stay. The one truncation
    of the judge's contexts and the trained model's prompts (:func:`full_metric.faces.training.generate_responses`)."""
    full = list(tokenizer(text, add_special_tokens=add_special_tokens, verbose=False)["input_ids"])
    head, body, tail = _split_special(tokenizer, text, full) if add_special_tokens else ([], full, [])
    room = max_tokens - len(head) - len(tail)
    if room < 1:
        raise UsageError(f"the context budget ({max_tokens} tokens) leaves no room for the dialog")
    dropped = max(0, len(body) - room)
    if keep == "start":
        return EncodedDialog(tuple(head + body[:room] + tail), dropped)
    ids = head + body[dropped:] + tail
    if not ids:  # a decoder-only model needs at least one token to predict from
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if start is None:
            raise UsageError("the dialog renders to no tokens and the tokenizer has no BOS or EOS token")
        ids = [start]
    return EncodedDialog(tuple(ids), dropped)


def _split_special(tokenizer: Any, text: str, full: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Split ids into the special tokens the tokenizer added before and after the text's own."""
    plain = list(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    extra = len(full) - len(plain)
    for start in range(extra + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], plain, full[start + len(plain) :]
    return [], full, []
