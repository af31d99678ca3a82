"""Tiny random models of many architectures of the installed transformers, built from small configs.

Each entry builds a model in eval mode that shares the fixture tokenizer's 2,000-token vocabulary
(ids 0 BOS, 1 PAD, 2 EOS). Windowed attention is set to 16 tokens, shorter than most test dialogs,
so the window is crossed; positions allow 256 tokens.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

VOCAB, WINDOW, POSITIONS = 2000, 16, 256
_IDS = {"bos_token_id": 0, "pad_token_id": 1, "eos_token_id": 2}
# the shape most decoder-only configs take (Llama's names)
_LLAMA_LIKE = {
    "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": POSITIONS, **_IDS,
}
_BART_LIKE = {
    "vocab_size": VOCAB, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
    "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
    "max_position_embeddings": POSITIONS, "decoder_start_token_id": 2, **_IDS,
}
_T5_LIKE = {
    "vocab_size": VOCAB, "d_model": 32, "d_ff": 64, "d_kv": 16, "num_layers": 2, "num_heads": 2,
    "decoder_start_token_id": 1, "pad_token_id": 1, "eos_token_id": 2,
}

#: name -> (config class, model class, config keywords); the name is the test id.
SPECS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # decoder-only, rotary positions
    "llama": ("LlamaConfig", "LlamaForCausalLM", _LLAMA_LIKE),
    "mistral": ("MistralConfig", "MistralForCausalLM", {**_LLAMA_LIKE, "sliding_window": None}),
    "mistral-window": ("MistralConfig", "MistralForCausalLM", {**_LLAMA_LIKE, "sliding_window": WINDOW}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {**_LLAMA_LIKE, "sliding_window": None, "num_local_experts": 2, "num_experts_per_tok": 1}),
    "mixtral-window": ("MixtralConfig", "MixtralForCausalLM",
                       {**_LLAMA_LIKE, "sliding_window": WINDOW, "num_local_experts": 2, "num_experts_per_tok": 1}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", _LLAMA_LIKE),
    "qwen2-window": ("Qwen2Config", "Qwen2ForCausalLM",
                     {**_LLAMA_LIKE, "use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 1}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**_LLAMA_LIKE, "head_dim": 8}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {**_LLAMA_LIKE, "head_dim": 8}),
    "gemma2-window": ("Gemma2Config", "Gemma2ForCausalLM",
                      {**_LLAMA_LIKE, "head_dim": 8, "sliding_window": WINDOW, "final_logit_softcapping": 30.0}),
    "gemma3-window": ("Gemma3TextConfig", "Gemma3ForCausalLM",
                      {**_LLAMA_LIKE, "head_dim": 8, "num_hidden_layers": 3, "sliding_window": WINDOW,
                       "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
                       "final_logit_softcapping": 30.0}),
    "phi": ("PhiConfig", "PhiForCausalLM", _LLAMA_LIKE),
    "phi3-window": ("Phi3Config", "Phi3ForCausalLM", {**_LLAMA_LIKE, "sliding_window": WINDOW}),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", _LLAMA_LIKE),
    "cohere": ("CohereConfig", "CohereForCausalLM", {**_LLAMA_LIKE, "logit_scale": 0.5}),
    "granite": ("GraniteConfig", "GraniteForCausalLM", {**_LLAMA_LIKE, "logits_scaling": 4.0}),
    "starcoder2-window": ("Starcoder2Config", "Starcoder2ForCausalLM", {**_LLAMA_LIKE, "sliding_window": WINDOW}),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", _LLAMA_LIKE),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", _LLAMA_LIKE),
    "falcon": ("FalconConfig", "FalconForCausalLM",
               {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, **_IDS}),
    "falcon-alibi": ("FalconConfig", "FalconForCausalLM",
                     {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                      "alibi": True, **_IDS}),
    "gptj": ("GPTJConfig", "GPTJForCausalLM",
             {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": POSITIONS,
              **_IDS}),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM",
                {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4,
                 "n_positions": POSITIONS, "n_ctx": POSITIONS, **_IDS}),
    # decoder-only, learned positions
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": POSITIONS, **_IDS}),
    "opt": ("OPTConfig", "OPTForCausalLM",
            {"vocab_size": VOCAB, "hidden_size": 32, "ffn_dim": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
             "word_embed_proj_dim": 32, "max_position_embeddings": POSITIONS, **_IDS}),
    "gpt_neo-window": ("GPTNeoConfig", "GPTNeoForCausalLM",
                       {"vocab_size": VOCAB, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
                        "attention_types": [[["global", "local"], 1]], "window_size": WINDOW,
                        "max_position_embeddings": POSITIONS, **_IDS}),
    # decoder-only, ALiBi biases
    "bloom": ("BloomConfig", "BloomForCausalLM", {"vocab_size": VOCAB, "hidden_size": 32, "n_layer": 2, "n_head": 4, **_IDS}),
    "mpt": ("MptConfig", "MptForCausalLM",
            {"vocab_size": VOCAB, "d_model": 32, "n_heads": 4, "n_layers": 2, "max_seq_len": POSITIONS,
             "expansion_ratio": 2, **_IDS}),
    # decoder-only, recurrent
    "mamba": ("MambaConfig", "MambaForCausalLM",
              {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2, "state_size": 4, "expand": 2, **_IDS}),
    # encoder-decoder
    "bart": ("BartConfig", "BartForConditionalGeneration", _BART_LIKE),
    "mbart": ("MBartConfig", "MBartForConditionalGeneration", _BART_LIKE),
    "pegasus": ("PegasusConfig", "PegasusForConditionalGeneration", _BART_LIKE),
    "marian": ("MarianConfig", "MarianMTModel", {**_BART_LIKE, "decoder_vocab_size": VOCAB}),
    "blenderbot": ("BlenderbotConfig", "BlenderbotForConditionalGeneration", _BART_LIKE),
    "blenderbot_small": ("BlenderbotSmallConfig", "BlenderbotSmallForConditionalGeneration", _BART_LIKE),
    "t5": ("T5Config", "T5ForConditionalGeneration", _T5_LIKE),
    "t5-v1.1": ("T5Config", "T5ForConditionalGeneration",
                {**_T5_LIKE, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}),
    "umt5": ("UMT5Config", "UMT5ForConditionalGeneration", _T5_LIKE),
    "longt5": ("LongT5Config", "LongT5ForConditionalGeneration", {**_T5_LIKE, "local_radius": 4}),
}


def build(name: str, seed: int = 0) -> Any:
    """The tiny random model ``name`` of :data:`SPECS`, in eval mode."""
    import transformers

    config_class, model_class, kwargs = SPECS[name]
    torch.manual_seed(seed)
    config = getattr(transformers, config_class)(**kwargs)
    return getattr(transformers, model_class)(config).eval()


BUILDERS: dict[str, Callable[[], Any]] = {name: (lambda n=name: build(n)) for name in SPECS}


def engines_table() -> str:
    """A Markdown table: each architecture, its model type, the candidate engines and why."""
    from full_metric.engines import candidates

    rows = ["| architecture | model type | engines, fastest first | why |", "|---|---|---|---|"]
    for name in SPECS:
        model = build(name)
        engines, reason = candidates(model)
        rows.append(f"| {name} | `{model.config.model_type}` | {' > '.join(engines)} | {reason} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m tests.tiny_architectures
    print(engines_table())
