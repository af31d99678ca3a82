"""The `full-metric score` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from full_metric import PAPER_FIVE, FullScorer
from full_metric.faces.cli import main
from full_metric.follow_ups import NAMED_SETS

from ..helpers import run_checked

REPO = Path(__file__).resolve().parents[2]


def test_score_turn_level(tiny_blenderbot_path, tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    records = [{"context": ["Hi!"], "response": "Hello.", "id": 7}, {"context": [], "response": "Héllo 🎉"}]
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--no-progress", "--batch-size", "1"]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = FullScorer(tiny_blenderbot_path, device="cpu", progress=False).score([["Hi!"], []], ["Hello.", "Héllo 🎉"])
    assert [line["full"] for line in lines] == pytest.approx(expected.scores)
    assert lines[0]["id"] == 7 and list(lines[0]["follow_up_log_likelihoods"]) == list(PAPER_FIVE)
    err = capsys.readouterr().err
    assert "scored 2 dialogs" in err and "FULL:" not in err  # no progress bar


def test_score_dialog_level_with_options(tiny_blenderbot_path, tmp_path):
    src, out, fus = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "fus.txt"
    src.write_text('{"context": ["Hi!", "Hello."]}\n')
    fus.write_text("Huh?\n\nWhat do you mean?\n")
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--follow-ups", str(fus), "--aggregation", "mean", "--no-progress"]) == 0
    line = json.loads(out.read_text())
    assert list(line["follow_up_log_likelihoods"]) == ["Huh?", "What do you mean?"]
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--follow-ups", "negative-turn", "--preset", "reference", "--no-progress"]) == 0
    assert len(json.loads(out.read_text())["follow_up_log_likelihoods"]) == 21


def test_positive_follow_ups_and_joined_sets(tiny_blenderbot_path, tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"context": ["Hi!"], "response": "Hello."}\n')
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--follow-ups", "paper", "--positive-follow-ups", "positive", "--no-progress"]) == 0
    line = json.loads(out.read_text())
    lls = line["follow_up_log_likelihoods"]
    assert len(lls) == 5 + 21
    positive = set(NAMED_SETS["positive"])
    expected = sum(v for f, v in lls.items() if f in positive) - sum(v for f, v in lls.items() if f not in positive)
    assert line["full"] == pytest.approx(expected)
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--follow-ups", "paper+negative-turn", "--no-progress"]) == 0
    assert len(json.loads(out.read_text())["follow_up_log_likelihoods"]) == len(
        set(NAMED_SETS["paper"]) | set(NAMED_SETS["negative-turn"]))
    assert main(["score", str(src), "-o", str(out), "--model", str(tiny_blenderbot_path), "--device", "cpu",
                 "--positive-follow-ups", "positive", "--aggregation", "perplexity", "--no-progress"]) == 2


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"context": ["a"], "response": "b"}\n{"context": 5, "response": "b"}\n',
         "line 2: field 'context' must be a list of strings or a string"),
        ('{"context": ["a"], "response": "b"}\n{"context": ["a"], "response": 3}\n', "line 2: field 'response' must be a string"),
        ('{"context": ["a"], "response": "b"}\n{oops\n', "line 2: not valid JSON"),
        ('{"context": ["a"], "response": "b"}\n{"context": ["a"]}\n', "line 2: mixes turn-level"),
        ('[1, 2]\n', "line 1: expected a JSON object"),
        ('{"context": []}\n', "line 1: field 'context' is an empty dialog"),
    ],
)
def test_malformed_input_exits_2(tmp_path, capsys, content, message):
    src = tmp_path / "in.jsonl"
    src.write_text(content)
    assert main(["score", str(src), "-o", str(tmp_path / "out.jsonl"), "--model", "not-loaded"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_console_script_progress_bar(tiny_blenderbot_path, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"context": ["Hi!"], "response": "Hello."}\n')
    done = run_checked(
        [sys.executable, "-m", "full_metric.faces.cli", "score", str(src), "-o", str(tmp_path / "o.jsonl"),
         "--model", str(tiny_blenderbot_path), "--device", "cpu"],
        timeout=300, cwd=REPO, env={"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "PATH": ""},
    )
    assert "FULL" in done.stderr and "100%" in done.stderr


def test_a_missing_extra_is_answered_with_the_install_command(monkeypatch, capsys, tmp_path):
    """``correlate`` needs scipy (the [analysis] extra): without it, the command says how to install it."""
    import sys

    monkeypatch.setitem(sys.modules, "scipy", None)  # as if scipy were not installed
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    src = tmp_path / "rated.jsonl"
    src.write_text("".join(json.dumps({"context": ["Hi"], "response": f"Hello {k}.", "human": k}) + "\n" for k in range(4)))
    code = main(["correlate", str(src), "--model", str(REPO / "tests" / "fixtures" / "tiny-blenderbot"), "--device", "cpu",
                 "--no-progress"])
    assert code == 2
    assert 'pip install scipy (in a checkout: pip install -e ".[analysis]")' in capsys.readouterr().err


@pytest.mark.parametrize("files, extra, message", [
    ({"a.jsonl": [("Hi!", "Hello.", None)]}, [], "compare needs two systems or more"),
    ({"a.jsonl": [("Hi!", "Hello.", "bot")], "b.jsonl": [("Hi!", "Hey.", "bot")]}, [], "name the same system"),
    ({"a.jsonl": [("Hi!", "Hello.", None)], "b.jsonl": [("Hi!", "Hey.", None)]}, ["--baseline", "c"],
     "--baseline 'c' is not one of the systems"),
    ({"a.jsonl": [("Hi!", "Hello.", None)], "b.jsonl": [("Bye!", "Hey.", None)]}, [], "must answer the same contexts"),
])
def test_compare_checks_what_is_cheap_before_loading_the_model(files, extra, message, tmp_path, capsys, monkeypatch):
    """Before, these were found after every file had been scored."""
    import full_metric.faces.cli as cli

    monkeypatch.setattr(cli, "_make_scorer", lambda args: pytest.fail("the model was loaded"))
    paths = []
    for name, rows in files.items():
        path = tmp_path / name
        path.write_text("".join(json.dumps({"context": [c], "response": r, **({"system": s} if s else {})}) + "\n"
                                for c, r, s in rows))
        paths.append(str(path))
    assert main(["compare", *paths, "--model", "never/loaded", *extra]) == 2
    assert message in capsys.readouterr().err


def test_an_internal_error_is_shown_as_a_bug_not_as_bad_input(tmp_path, capsys, monkeypatch):
    """Before, every TypeError / ValueError, bugs included, was exit 2 with no traceback."""
    import full_metric.faces.cli as cli

    def broken(args):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    monkeypatch.setitem(cli.CORE_COMMANDS, "score", broken)
    rows = tmp_path / "in.jsonl"
    rows.write_text(json.dumps({"context": ["Hi!"], "response": "Hello."}) + "\n")
    assert main(["score", str(rows), "-o", str(tmp_path / "out.jsonl")]) == cli.INTERNAL_ERROR == 1
    err = capsys.readouterr().err
    assert "internal error (a bug in full-metric" in err and "TypeError" in err and "--debug" in err
    with pytest.raises(TypeError, match="unsupported operand"):
        main(["--debug", "score", str(rows), "-o", str(tmp_path / "out.jsonl")])
    monkeypatch.setitem(cli.CORE_COMMANDS, "score", lambda args: (_ for _ in ()).throw(ValueError("a library's own error")))
    assert main(["score", str(rows), "-o", str(tmp_path / "out.jsonl")]) == 1  # not ours: not a user error
    # a user error stays one line and exit 2
    assert main(["score", str(rows), "-o", str(rows)]) == 2
    assert "the output is the input file" in capsys.readouterr().err


def test_every_option_that_names_a_setting_is_declared_by_settings():
    """No subcommand writes its own --model, --device, --batch-size...: flag, type and choices come
    from full_metric.settings (adapt wrote seven by hand, and its device default skipped auto)."""
    import argparse

    from full_metric.faces.cli import _parser
    from full_metric.settings import BY_NAME

    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    checked = set()
    for name, command in commands.items():
        for action in command._actions:
            setting = BY_NAME.get(action.dest)
            if setting is None or not setting.at_load:
                continue
            assert action.option_strings == [setting.flag], (name, action.dest)
            assert action.default in (None, True), (name, action.dest)  # the called function's default applies
            if setting.kind is not bool:
                assert action.type is setting.kind, (name, action.dest)
                assert action.choices == (setting.choices() if setting.choices else None), (name, action.dest)
            checked.add((name, action.dest))
    assert {d for c, d in checked if c == "adapt"} == {"model", "gguf_file", "preset", "rendering", "device",
                                                       "batch_size", "progress"}


def test_every_command_answers_a_folder_or_a_missing_file_in_one_line(tmp_path, capsys):
    """Issue 62, 9: compare read a folder or a missing file as an internal error; every command reads its inputs
    through one check, before any model is loaded."""
    good = tmp_path / "a.jsonl"
    good.write_text(json.dumps({"context": ["Hi!"], "response": "Fine."}) + "\n")
    for command in (["compare", str(tmp_path), str(good)], ["compare", str(good), str(tmp_path / "gone.jsonl")],
                    ["score", str(tmp_path), "-o", str(tmp_path / "o.jsonl")]):
        assert main([*command, "--model", "never/loaded"]) == 2
        err = capsys.readouterr().err
        assert "internal error" not in err and ("a folder, not a file" in err or "no such file" in err), err
        assert len(err.strip().splitlines()) == 1


def test_the_settings_table_prints_without_a_warning():
    """Issue 62, 9: `python -m full_metric.settings` (the README's Inputs table) writes nothing on stderr."""
    done = run_checked([sys.executable, "-m", "full_metric.settings"], cwd=REPO)
    assert done.stdout.startswith("| `evaluate.load` / scorer |") and done.stderr == ""


def test_correlate_leaves_out_an_unscored_item_counts_and_names_it(tmp_path, capsys):
    """Issue 62, 0: one response too long for the tiny BlenderBot's 128 positions no longer fails the whole
    correlation: its rows count the others (n) and a line names it."""
    long = " ".join(f"word{i}" for i in range(400))
    rows = [{"context": ["Hi"], "response": long if k == 2 else f"Hello {k}, nice to meet you.", "human": k}
            for k in range(6)]
    src = tmp_path / "rated.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "c.json"
    assert main(["correlate", str(src), "--model", str(REPO / "tests" / "fixtures" / "tiny-blenderbot"), "--device",
                 "cpu", "--no-progress", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "turn level, left out of every row: 1 of 6 items not scored (2)" in printed
    row = json.loads(out.read_text())["rows"][0]
    assert (row["n"], row["not_scored"]) == (5, 1)


def test_the_module_prints_the_folder_reproduce_sh_reads(monkeypatch, tmp_path):
    """`python -m full_metric.cache`, as reports/smollm2-relevance/reproduce.sh and docs/cli.md run it."""
    import subprocess

    monkeypatch.setenv("FULL_METRIC_CACHE", str(tmp_path / "c"))
    done = subprocess.run([sys.executable, "-m", "full_metric.cache"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(tmp_path / "c") and done.stderr == ""
