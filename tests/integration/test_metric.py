"""FULL as an evaluate metric: loading paths, inputs, caching, combine/save/add, distribution."""

from __future__ import annotations

import doctest
import json
import math
import os
import sys
from pathlib import Path

import evaluate
import pytest

import full_metric
from full_metric import PRESETS, FullScorer
from full_metric.faces import metric as metric_module

from ..helpers import run_together

REPO = Path(__file__).resolve().parents[2]
CONTEXTS = [["Hi!", "How was your weekend?"], ["I just adopted a puppy!"], []]
RESPONSES = ["It was great, I went hiking.", "My car needs new tires.", "Hello there."]


@pytest.fixture()
def checkout_named_full(tmp_path):
    """A folder holding this checkout under the name ``full`` (evaluate's local convention)."""
    (tmp_path / "full").symlink_to(REPO, target_is_directory=True)
    return tmp_path


@pytest.fixture()
def count_loads(monkeypatch):
    calls = []
    real = metric_module.load_model

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(metric_module, "_LOADED", {})
    monkeypatch.setattr(metric_module, "load_model", counting)
    return calls


@pytest.fixture(scope="module")
def expected(tiny_blenderbot_path):
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    return scorer.score(CONTEXTS, RESPONSES), scorer.score([c + [r] for c, r in zip(CONTEXTS, RESPONSES)])


def _load(path, tiny, *args, **kwargs):
    return evaluate.load(str(path), *args, model=str(tiny), device="cpu", progress=False, **kwargs)


def test_load_by_name_from_parent_folder(checkout_named_full, tiny_blenderbot_path, expected, monkeypatch):
    monkeypatch.chdir(checkout_named_full)
    full = _load("full", tiny_blenderbot_path)
    assert isinstance(full, evaluate.EvaluationModule)
    assert full.compute(predictions=RESPONSES, references=CONTEXTS)["scores"] == pytest.approx(expected[0].scores)


@pytest.mark.parametrize("how", ["script", "folder"])
def test_load_by_path(how, checkout_named_full, tiny_blenderbot_path, expected):
    path = REPO / "full.py" if how == "script" else checkout_named_full / "full"
    full = _load(path, tiny_blenderbot_path)
    assert full.compute(predictions=RESPONSES, references=CONTEXTS)["full"] == pytest.approx(expected[0].mean)


def test_direct_class_and_outputs(tiny_blenderbot_path, expected):
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    out = full.compute(predictions=RESPONSES, references=CONTEXTS)
    assert set(out) == {"full", "scores", "unscored", "follow_up_log_likelihoods", "follow_ups", "positive_follow_ups",
                        "signature"}
    for got, want in zip(out["follow_up_log_likelihoods"], expected[0].follow_up_log_likelihoods, strict=True):
        assert got == pytest.approx(want)
    assert out["signature"] == expected[0].signature
    assert out["follow_ups"] == list(full_metric.PAPER_FIVE)


def test_missing_package_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "full_metric", None)
    with pytest.raises(ImportError, match=r"pip install git\+https://huggingface.co/spaces/<user>/full"):
        evaluate.load(str(REPO / "full.py"))


def test_dialog_config(checkout_named_full, tiny_blenderbot_path, expected):
    """The 'dialog' config scores whole dialogs as the scorer does."""
    full = _load(checkout_named_full / "full", tiny_blenderbot_path, "dialog")
    dialogs = [c + [r] for c, r in zip(CONTEXTS, RESPONSES)]
    out = full.compute(predictions=dialogs)
    assert out["scores"] == pytest.approx(expected[1].scores)
    assert out["signature"].endswith("level:dialog")
    as_text = full.compute(predictions=["\n".join(d) for d in dialogs])
    assert as_text["scores"] == pytest.approx(expected[1].scores)


@pytest.mark.parametrize("first", ["list", "string"])
def test_mixed_string_and_list_contexts_are_not_corrupted(first, tiny_blenderbot_path, expected):
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    refs = [c if (i % 2 == 0) == (first == "list") else "\n".join(c) for i, c in enumerate(CONTEXTS)]
    out = full.compute(predictions=RESPONSES, references=refs)
    assert out["scores"] == pytest.approx(expected[0].scores)
    full.add_batch(predictions=RESPONSES, references=refs)
    assert full.compute()["scores"] == pytest.approx(expected[0].scores)


def test_speaker_prefixes_removed_when_asked_and_the_signature_says_so(tiny_blenderbot_path, expected):
    refs = ["\n".join(f"{'User' if i % 2 == 0 else 'System'}: {t}" for i, t in enumerate(c)) for c in CONTEXTS]
    preds = [f"System: {r}" for r in RESPONSES]
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False, strip_speaker_prefixes=True)
    stripped = full.compute(predictions=preds, references=refs)
    assert stripped["scores"] == pytest.approx(expected[0].scores)
    assert stripped["signature"] == expected[0].signature.replace("|trunc:", "|speakers:stripped|trunc:")
    full.add_batch(predictions=preds, references=refs, strip_speaker_prefixes=True)  # the load setting again
    assert full.compute()["scores"] == pytest.approx(expected[0].scores)
    plain = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    kept = plain.compute(predictions=preds, references=refs)
    assert kept["scores"] != pytest.approx(expected[0].scores)
    assert kept["signature"] == expected[0].signature
    # a result has one signature: a call cannot change what the load setting says, and a response that
    # is only a label is refused before anything is stored
    with pytest.raises(ValueError, match="strip_speaker_prefixes=True in a call.*pass it to evaluate.load"):
        plain.compute(predictions=preds, references=refs, strip_speaker_prefixes=True)
    with pytest.raises(ValueError, match=r"predictions\[1\] is only a speaker label"):
        full.add_batch(predictions=["Fine.", "System: "], references=refs[:2])
    with pytest.raises(ValueError, match="call `add` or `add_batch` at least once"):
        full.compute()  # nothing was stored


def test_model_loaded_once(count_loads, checkout_named_full, tiny_blenderbot_path):
    """Several metric instances with the same model settings load the model once."""
    a = _load(checkout_named_full / "full", tiny_blenderbot_path)
    a.compute(predictions=RESPONSES, references=CONTEXTS)
    a.compute(predictions=RESPONSES, references=CONTEXTS, batch_size=1, follow_ups=["Huh?"])
    b = _load(REPO / "full.py", tiny_blenderbot_path, aggregation="mean")
    b.compute(predictions=RESPONSES, references=CONTEXTS)
    assert len(count_loads) == 1
    c = _load(REPO / "full.py", tiny_blenderbot_path, dtype="bfloat16")
    c.compute(predictions=RESPONSES, references=CONTEXTS)
    assert len(count_loads) == 2  # the dtype changes scores, so it is part of the key


def test_compute_time_follow_ups(tiny_blenderbot_path):
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    out = full.compute(predictions=RESPONSES, references=CONTEXTS, follow_ups=["Huh?", "What?"])
    assert out["follow_ups"] == ["Huh?", "What?"] and len(out["follow_up_log_likelihoods"][0]) == 2


def test_add_and_add_batch(tiny_blenderbot_path, expected):
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    full.add(prediction=RESPONSES[0], reference=CONTEXTS[0])
    full.add_batch(predictions=RESPONSES[1:], references=CONTEXTS[1:])
    assert full.compute()["scores"] == pytest.approx(expected[0].scores)


class ResponseLength(evaluate.Metric):
    """A simple metric to combine with: the mean response length in words."""

    def _info(self):
        import datasets

        return evaluate.MetricInfo(
            description="mean response length", citation="", inputs_description="",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Sequence(datasets.Value("string"))}
            ),
        )

    def _compute(self, predictions, references):
        return {"length": sum(len(p.split()) for p in predictions) / len(predictions)}


def test_combine_and_save(tiny_blenderbot_path, expected, tmp_path):
    """evaluate.combine and the metric's saved results hold FULL's numbers."""
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    combined = evaluate.combine([full, ResponseLength()])
    out = combined.compute(predictions=RESPONSES, references=CONTEXTS)
    assert out["full"] == pytest.approx(expected[0].mean)
    assert out["length"] == pytest.approx(sum(len(r.split()) for r in RESPONSES) / 3)
    saved = evaluate.save(str(tmp_path), **out)
    assert json.loads(Path(saved).read_text())["scores"] == pytest.approx(expected[0].scores)


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"predictions": RESPONSES[:2], "references": CONTEXTS}, ValueError, "3 references but 2 predictions"),
        ({"predictions": ["ok", None, "ok"], "references": CONTEXTS}, TypeError, r"predictions\[1\] must be a string"),
        ({"predictions": RESPONSES, "references": [["a"], [None], []]}, TypeError, r"references\[1\]\[0\]"),
        ({"predictions": RESPONSES, "references": [["a"], 5, []]}, TypeError, r"references\[1\] must be a list"),
        ({"predictions": [], "references": []}, ValueError, "nothing to score: compute was given no predictions"),
        ({"predictions": RESPONSES, "references": "one string"}, TypeError, "references must be a list"),
        ({"predictions": RESPONSES, "references": CONTEXTS, "batch_size": 0}, ValueError, "batch_size"),
        ({"predictions": RESPONSES, "references": CONTEXTS, "follow_ups": []}, ValueError, "follow_ups is empty"),
    ],
)
def test_bad_input_then_good_compute(kwargs, error, message, tiny_blenderbot_path, expected):
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    with pytest.raises(error, match=message):
        full.compute(**kwargs)
    if set(kwargs) == {"predictions", "references"} and kwargs["predictions"]:  # (adding nothing is no error)
        with pytest.raises(error, match=message):
            full.add_batch(**kwargs)
    out = full.compute(predictions=RESPONSES, references=CONTEXTS)
    assert out["scores"] == pytest.approx(expected[0].scores)


def test_bad_settings():
    """Bad settings of evaluate.load are refused before any model work, naming the setting."""
    with pytest.raises(ValueError, match="unknown config"):
        full_metric.FULL("sentence")
    with pytest.raises(ValueError, match="unknown aggregation"):
        full_metric.FULL(aggregation="max")
    with pytest.raises(ValueError, match="unknown preset"):
        full_metric.FULL(preset="best")
    # issue 62, 9: a misspelled load setting is refused as a misspelled compute option is, never dropped
    with pytest.raises(TypeError, match="unknown load setting 'batchsize'; did you mean 'batch_size'"):
        full_metric.FULL(model="smollm2-gguf", batchsize=4)
    with pytest.raises(TypeError, match="unknown option 'folow_ups'; did you mean 'follow_ups'"):
        full_metric.FULL.check_call_options({"folow_ups": ["Hm."]})


def test_a_misspelled_setting_is_refused_through_evaluate_load(tiny_blenderbot_path):
    with pytest.raises(TypeError, match="unknown load setting 'batchsize'; did you mean 'batch_size'"):
        evaluate.load(str(REPO / "full.py"), model=str(tiny_blenderbot_path), batchsize=4)
    full = evaluate.load(str(REPO / "full.py"), model=str(tiny_blenderbot_path), progress=False, keep_in_memory=True)
    assert full.compute(predictions=["Fine."], references=[["Hi!"]])["unscored"] == []  # evaluate's own keywords pass


_WORKER = """
import json, sys
import full_metric
rank, cache, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
contexts, responses = json.loads(sys.argv[4]), json.loads(sys.argv[5])
full = full_metric.FULL(model=model, device="cpu", progress=False, num_process=2, process_id=rank,
                        experiment_id="two-process-test", cache_dir=cache)
half = slice(0, 2) if rank == 0 else slice(2, None)
full.add_batch(predictions=responses[half], references=contexts[half])
print(json.dumps(full.compute()))
"""


def test_two_processes_equal_one(tiny_blenderbot_path, expected, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(tmp_path), str(tiny_blenderbot_path), json.dumps(CONTEXTS), json.dumps(RESPONSES)]
    outs = run_together([[sys.executable, "-c", _WORKER, str(rank), *args] for rank in (0, 1)], timeout=300, env=env)
    first, second = (json.loads(out.strip().splitlines()[-1]) for out in outs)
    assert second is None
    assert first["scores"] == pytest.approx(expected[0].scores)
    assert first["full"] == pytest.approx(expected[0].mean)


def test_docstring_examples_run(checkout_named_full, tiny_blenderbot_path, monkeypatch):
    monkeypatch.chdir(checkout_named_full)
    monkeypatch.setitem(PRESETS["paper"], "model", str(tiny_blenderbot_path))  # the default model, for the doctest
    parser = doctest.DocTestParser()
    test = parser.get_doctest(metric_module._KWARGS_DESCRIPTION, {}, "_KWARGS_DESCRIPTION", None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert test.examples and runner.failures == 0


def test_the_metric_script_warns_when_the_installed_package_is_another_version(monkeypatch):
    import full_metric.faces.metric as metric_module

    monkeypatch.setattr(metric_module, "__version__", "9.9.9")
    source = (REPO / "full.py").read_text(encoding="utf-8")
    with pytest.warns(UserWarning, match="written for full-metric 0.1.0, but 9.9.9 is installed"):
        exec(compile(source, "full.py", "exec"), {})


def test_an_empty_response_is_scored_alike_in_every_face(tiny_blenderbot_path, tmp_path):
    """Issue 62, 9: an empty or blank response is a response, scored as the reply it is, with one number in every
    face: evaluate's compute, the scorer, the command line, the app's batch, the TRL reward."""
    import json

    from full_metric.faces.app_data import score_rows
    from full_metric.faces.cli import main
    from full_metric.training import full_reward

    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    contexts, responses = [["How was your weekend?"]] * 3, ["", "   ", "Great, I went hiking."]
    want = scorer.score(contexts, responses).scores
    assert not any(math.isnan(s) for s in want) and want[0] != want[2]
    full = full_metric.FULL(model=str(tiny_blenderbot_path), device="cpu", progress=False)
    assert full.compute(predictions=responses, references=contexts)["scores"] == pytest.approx(want, abs=1e-5)
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"context": c, "response": r}) + "\n" for c, r in zip(contexts, responses)))
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--no-progress"]) == 0
    assert [json.loads(line)["full"] for line in out.open()] == pytest.approx(want, abs=1e-5)
    rows = [{"context": c, "response": r} for c, r in zip(contexts, responses)]
    score_rows(scorer, rows, scorer.follow_ups, scorer.aggregation)
    assert [r["full"] for r in rows] == pytest.approx(want, abs=1e-5)
    # a generation is read by its first non-empty line (answers.response_of): the empty one as it is
    assert full_reward(scorer)(["How was your weekend?"] * 2, ["", responses[2]]) == pytest.approx(
        [want[0], want[2]], abs=1e-5)
