"""The Space app's helpers, without a browser."""

from __future__ import annotations

import json

import pytest

from full_metric import NAMED_SETS, PAPER_FIVE, FullScorer
from full_metric.faces.app_data import (
    CUSTOM, PRESET_CHOICE, InputError, Limits, choose_follow_ups, choose_settings, parse_candidates, parse_dialog, rank,
    read_upload, score_in_chunks, score_rows, summarize, write_scored,
)

SMALL = Limits(turns=3, characters=200, candidates=2, rows=2, upload_bytes=500)


def test_parse_dialog_and_limits():
    assert parse_dialog("User: Hi!\n\nSystem: Hello!\n") == ["User: Hi!", "System: Hello!"]  # the scorer strips
    with pytest.raises(InputError, match="4 turns; the limit is 3"):
        parse_dialog("a\nb\nc\nd", SMALL)
    with pytest.raises(InputError, match="201 characters; the limit is 200"):
        parse_dialog("x" * 201, SMALL)
    with pytest.raises(InputError, match="at least one candidate"):
        parse_candidates("\n \n")
    with pytest.raises(InputError, match="3 candidates; the limit is 2"):
        parse_candidates("a\nb\nc", SMALL)
    # issue 62, 9: None through the named API is named, as an empty box is (not Gradio's opaque error)
    with pytest.raises(InputError, match="the dialog must be text, one turn per line; got NoneType"):
        parse_dialog(None)
    with pytest.raises(InputError, match="the candidate list must be text"):
        parse_candidates(None)


def test_follow_up_choice():
    """The app's follow-up menu: a named set, custom lines, repeated or empty lines refused."""
    assert choose_follow_ups("negative-turn", "") == NAMED_SETS["negative-turn"]
    assert choose_follow_ups(CUSTOM, "Huh?\n\nWhat?\n") == ("Huh?", "What?")
    with pytest.raises(InputError, match="repeats"):
        choose_follow_ups(CUSTOM, "Huh?\nHuh?")
    with pytest.raises(InputError, match="follow_ups is empty"):
        choose_follow_ups(CUSTOM, "\n")


def test_settings_choice(tiny_blenderbot_path):
    """The app's settings: the preset's follow-ups and aggregation, or custom ones; bad mixes refused."""
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    assert choose_settings(scorer, PRESET_CHOICE, "", "", PRESET_CHOICE) == {
        "follow_ups": PAPER_FIVE, "positive_follow_ups": (), "aggregation": "sum"}
    chosen = choose_settings(scorer, CUSTOM, "Huh?", "Nice!\nCool.", "mean")
    assert chosen == {"follow_ups": ("Huh?",), "positive_follow_ups": ("Nice!", "Cool."), "aggregation": "mean"}
    assert choose_settings(scorer, "paper", "", "Nice!", "sum")["positive_follow_ups"] == ()  # custom only
    with pytest.raises(InputError, match="both negative and positive"):
        choose_settings(scorer, CUSTOM, "Huh?", "Huh?", "sum")
    with pytest.raises(InputError, match="perplexity"):
        choose_settings(scorer, CUSTOM, "Huh?", "Nice!", "perplexity")


def test_rank_and_summary():
    """Ranking candidates, and the batch summary's intervals and paired tests."""
    assert rank(["a", "b", "c"], [1.0, 3.0, 2.0]) == [(1, "b", 3.0), (2, "c", 2.0), (3, "a", 1.0)]
    # without systems: the mean and its interval (all bootstrap means of [1, 2, 3] lie in [1, 3])
    table, comparison = summarize([{"full": 1.0}, {"full": 3.0}, {"full": 2.0}])
    assert comparison is None and len(table) == 1
    assert table[0]["items"] == 3 and table[0]["mean FULL"] == 2.0 and 1.0 <= table[0]["CI low"] < 2.0 < table[0]["CI high"] <= 3.0
    # two systems answering the same contexts (in another order): paired, against the chosen baseline
    rows = [{"full": float(k), "system": "x", "context": [f"c{k}"], "response": "r"} for k in range(12)]
    rows += [{"full": k + 5.0, "system": "y", "context": [f"c{k}"], "response": "r"} for k in reversed(range(12))]
    table, comparison = summarize(rows, baseline="y")
    assert [r["group"] for r in table] == ["all", "x", "y"] and comparison.paired and comparison.baseline == "y"
    x = table[1]
    assert x["vs baseline"] == "-5.000" and x["significant"] == "yes" and x["paired"] == "yes"
    assert x["p"] == pytest.approx(1 / 1001)  # a constant difference: no resample as far from it as it is from 0
    assert table[2]["vs baseline"] == "baseline"
    # systems that answered different contexts: compared unpaired, and the table says so
    rows[-1] = {**rows[-1], "context": ["elsewhere"]}
    assert summarize(rows)[0][1]["paired"] == "no (different contexts)"


def test_read_jsonl_and_csv():
    jsonl = b'{"context": ["Hi!"], "response": "Hello.", "system": "a"}\n\n{"context": "Hi!\\nHello.", "response": "Yo."}\n'
    rows = read_upload("d.jsonl", jsonl)
    assert rows[0]["context"] == ["Hi!"] and rows[1]["context"] == ["Hi!", "Hello."] and rows[1]["response"] == "Yo."
    assert read_upload("d.jsonl", b'{"context": "Hi!\\nHello."}\n')[0]["response"] is None  # dialog level
    csv_rows = read_upload("d.csv", 'context,response,system\n"Hi!\nHow are you?",Fine.,bot\n'.encode())
    assert csv_rows == [{"context": ["Hi!", "How are you?"], "response": "Fine.", "system": "bot"}]


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("d.jsonl", b'{"context": ["Hi"]}\n{oops\n', "line 2: not valid JSON"),
        ("d.jsonl", b'{"response": "x"}\n', "line 1: missing field 'context'"),
        ("d.jsonl", b'{"context": [1]}\n', "line 1: field 'context' must be a list of strings"),
        ("d.jsonl", b"[1, 2]\n", "line 1: expected a JSON object"),
        ("d.csv", b"text,response\nhi,there\n", "line 1: the CSV header needs a 'context' column"),
        ("d.jsonl", b"\xff\xfe{}", "not UTF-8"),
        ("d.txt", b"hello", "upload a .jsonl, .json or .csv file"),
        ("d.jsonl", b"", "no rows"),
        ("d.jsonl", b'{"context": ["a"]}\n' * 3, "3 rows; the limit is 2"),
        ("d.jsonl", b"x" * 501, "501 bytes; the limit is 500"),
    ],
)
def test_bad_uploads(name, data, message):
    """Each malformed upload is refused with a message naming the line and the problem."""
    with pytest.raises(InputError, match=message):
        read_upload(name, data, SMALL)


def test_score_rows_of_each_level(tiny_blenderbot_path):
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    for data, level, want in ((b'{"context": ["Hi!"], "response": "Hello."}\n', "turn", scorer.score([["Hi!"]], ["Hello."])),
                              (b'{"context": ["Hi!", "Hello."]}\n', "dialog", scorer.score([["Hi!", "Hello."]]))):
        rows = read_upload("d.jsonl", data)
        assert f"level:{level}" in score_rows(scorer, rows, NAMED_SETS["paper"], "sum")
        assert rows[0]["full"] == pytest.approx(want.scores[0])
        json.dumps(rows)


def test_follow_up_limits_and_limits_from_the_environment():
    limits = Limits(follow_ups=2, follow_up_characters=5, characters=40)
    with pytest.raises(InputError, match="3 follow-ups; the limit is 2"):
        choose_follow_ups(CUSTOM, "a?\nb?\nc?", limits)
    with pytest.raises(InputError, match="follow-up 2 has 6 characters; the limit is 5"):
        choose_follow_ups(CUSTOM, "a?\nabcdef", limits)
    with pytest.raises(InputError, match="41 characters; the limit is 40"):
        choose_follow_ups(CUSTOM, "x" * 41, limits)
    assert Limits.from_env({"FULL_LIMIT_ROWS": "5", "FULL_LIMIT_BATCH_SECONDS": "7"}) == Limits(rows=5, batch_seconds=7)
    with pytest.raises(ValueError, match="FULL_LIMIT_QUEUE must be a positive integer"):
        Limits.from_env({"FULL_LIMIT_QUEUE": "0"})


def test_upload_rows_over_the_character_limit_name_their_line():
    with pytest.raises(InputError, match="line 2: the context has 201 characters; the limit is 200"):
        read_upload("d.jsonl", b'{"context": ["a"]}\n' + json.dumps({"context": ["x" * 201]}).encode(), SMALL)
    with pytest.raises(InputError, match="line 1: the response has 201 characters"):
        read_upload("d.jsonl", json.dumps({"context": ["a"], "response": "y" * 201}).encode(), SMALL)


def test_scored_csv_download_makes_formulas_inert(tmp_path):
    rows = [{"context": ["=1+1", "Hi"], "response": "-2 apples", "system": "@bot", "full": -1.23456789,
             "follow_up_log_likelihoods": {"Huh?": -3.5}}]
    path = write_scored(rows, tmp_path / "out.csv", as_csv=True)
    import csv

    (row,) = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    assert row == {"context": "'=1+1\nHi", "response": "'-2 apples", "system": "'@bot", "full": "-1.23456789",
                   "log-likelihood: Huh?": "-3.5"}
    jsonl = write_scored(rows, tmp_path / "out.jsonl", as_csv=False)
    assert [json.loads(line) for line in jsonl.read_text().splitlines()] == rows  # JSON Lines: values as they are


def test_scoring_in_chunks_reports_progress_and_equals_one_pass(tiny_blenderbot_path):
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    rows = [{"context": [f"Turn {k}"], "response": f"Answer {k}." if k % 3 else None} for k in range(7)]
    steps = list(score_in_chunks(scorer, rows, PAPER_FIVE, "sum", chunk_size=3))
    assert [done for done, _ in steps] == [3, 6, 7]
    assert len(steps[-1][1]) == 2  # one signature per level
    turn = [r for r in rows if r["response"] is not None]
    assert [r["full"] for r in turn] == pytest.approx(
        scorer.score([r["context"] for r in turn], [r["response"] for r in turn]).scores)


def test_a_candidate_has_one_label_in_the_turn_tabs_table_and_chart(tiny_blenderbot_path):
    """Before, the ranking table numbered candidates by rank while the chart said #1, #2 by input
    order: "#1" named two different responses."""
    from full_metric.faces.webapp import PRESET_CHOICE, _Handlers, candidate_labels

    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    handlers = _Handlers(scorer, Limits())
    candidates = ["The capital of Australia is Canberra.", "It was great, I went hiking with my sister."]
    ranked, chart, _ = handlers.score_turn("Hi! How was your weekend?", "\n".join(candidates), scorer.preset,
                                           PRESET_CHOICE, "", "", PRESET_CHOICE)
    labels = candidate_labels(candidates)
    assert set(ranked["candidate"]) == set(chart["candidate"]) == set(labels)
    scores = scorer.score([["Hi! How was your weekend?"]] * 2, candidates).scores
    for label, score in zip(ranked["candidate"], ranked["score"]):
        assert score == round(scores[labels.index(label)], 3)  # each label names its own response


def test_switching_preset_keeps_the_run_options_in_the_command_line_and_the_app(tiny_blenderbot_path, monkeypatch):
    """Before, the app built the other preset's scorer with none of them: FULL_CONTEXT_BUDGET was lost."""
    from full_metric.faces.webapp import PRESET_CHOICE, _Handlers, scorer_from_env

    monkeypatch.setenv("FULL_MODEL", str(tiny_blenderbot_path))
    monkeypatch.setenv("FULL_CONTEXT_BUDGET", "40")
    monkeypatch.setenv("FULL_BATCH_SIZE", "3")
    scorer = scorer_from_env()
    assert scorer.with_preset(scorer.preset) is scorer
    chosen, _ = _Handlers(scorer, Limits()).settings("reference", PRESET_CHOICE, "", "", PRESET_CHOICE)
    assert chosen.preset == "reference" and chosen.loaded is scorer.loaded
    assert {k: getattr(chosen, k) for k in FullScorer.RUN_OPTIONS} == {
        "batch_size": 3, "max_batch_tokens": scorer.max_batch_tokens, "context_budget": 40,
        "strip_speaker_prefixes": True, "progress": False}
    assert chosen.max_turns == 50 and chosen.rendering == "reference"  # the preset's own settings


def test_the_apps_scorer_strips_speaker_labels_and_says_so(tiny_blenderbot_path, monkeypatch):
    """The app passes strip_speaker_prefixes to its scorer (on unless FULL_STRIP_SPEAKER_PREFIXES=0)
    instead of stripping the text boxes itself: the signature shows it, and a candidate that is only a
    label is a message, not a crash."""
    import gradio as gr

    from full_metric.faces.webapp import PRESET_CHOICE, _Handlers, scorer_from_env

    monkeypatch.setenv("FULL_MODEL", str(tiny_blenderbot_path))
    handlers = _Handlers(scorer_from_env(), Limits())
    options = (handlers.scorer.preset, PRESET_CHOICE, "", "", PRESET_CHOICE)
    ranked, _, signature = handlers.score_turn("User: Hi!\nSystem: How was your weekend?", "User: Great, thanks.",
                                               *options)
    plain = FullScorer(tiny_blenderbot_path, device="cpu", progress=False)
    expected = plain.score([["Hi!", "How was your weekend?"]], ["Great, thanks."])
    assert ranked["score"][0] == round(expected.scores[0], 3)
    assert signature == expected.signature.replace("|trunc:", "|speakers:stripped|trunc:")
    with pytest.raises(gr.Error, match="only a speaker label"):
        handlers.score_turn("Hi!", "System:", *options)
    monkeypatch.setenv("FULL_STRIP_SPEAKER_PREFIXES", "0")
    assert "speakers:" not in _Handlers(scorer_from_env(), Limits()).score_dialog("User: Hi!", *options)[2]


def test_the_app_shows_the_metric_card(tiny_blenderbot_path):
    """The Space shows README.md's card (without its front matter): the app's default and the
    path app.py passes both find the repository root's README."""
    from pathlib import Path

    from full_metric.faces.webapp import CARD, build_app

    root = Path(__file__).resolve().parents[2]
    assert CARD == root / "README.md"
    assert 'card=Path(__file__).with_name("README.md")' in (root / "app.py").read_text()
    demo = build_app(FullScorer(str(tiny_blenderbot_path), progress=False), SMALL)
    texts = [b.value for b in demo.blocks.values() if type(b).__name__ == "Markdown"]
    card = [t for t in texts if "# Metric Card for FULL" in t]
    assert len(card) == 1 and "sdk: gradio" not in card[0]


def test_a_batch_row_the_scorer_refuses_is_named_by_its_line_before_any_model_work(tiny_blenderbot_path, monkeypatch,
                                                                                  tmp_path):
    """An uploaded row the scorer refuses (a response that is only a speaker label: the app strips
    labels; a response that is not text) is refused before any row is scored, naming the file's line
    (not the row's place in a chunk); a file of good rows is scored whole."""
    import gradio as gr

    from full_metric.faces.webapp import PRESET_CHOICE, _Handlers, scorer_from_env

    monkeypatch.setenv("FULL_MODEL", str(tiny_blenderbot_path))
    handlers = _Handlers(scorer_from_env(), Limits(characters=500_000))
    options = (handlers.scorer.preset, PRESET_CHOICE, "", "", PRESET_CHOICE)
    good = [{"context": ["Hi!"], "response": f"Fine {k}."} for k in range(20)]
    calls = []
    monkeypatch.setattr(handlers.scorer, "_batched", lambda *a, **k: calls.append(a) or pytest.fail("model work"))
    for bad, problem in (("System: ", "only a speaker label"), (["a list"], "must be a string")):
        path = tmp_path / "rows.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in [*good[:18], {"context": ["Hi!"], "response": bad},
                                                              *good[18:]]))
        with pytest.raises(gr.Error, match=f"rows.jsonl: line 19: .*{problem}"):
            list(handlers.score_file(str(path), None, *options, progress=lambda *a, **k: None))
    assert not calls
    monkeypatch.undo()
    monkeypatch.setenv("FULL_MODEL", str(tiny_blenderbot_path))
    path.write_text("".join(json.dumps(r) + "\n" for r in good))
    *_, last = handlers.score_file(str(path), None, *options, progress=lambda *a, **k: None)
    assert last[-1] == "all 20 rows scored"


def test_a_response_that_leaves_no_room_for_the_dialog_is_refused_in_both_text_tabs(tiny_blenderbot_path):
    """No ranking or score with a NaN in it: the turn tab names the candidate, the dialog tab the last turn."""
    import gradio as gr

    from full_metric.faces.webapp import PRESET_CHOICE, _Handlers

    handlers = _Handlers(FullScorer(tiny_blenderbot_path, device="cpu", progress=False), Limits())
    long = " ".join(["word"] * 600)
    with pytest.raises(gr.Error, match="candidate 2 leaves the model no room"):
        handlers.score_turn("Hi! How was your weekend?", f"Great, I went hiking.\n{long}", "", PRESET_CHOICE)
    with pytest.raises(gr.Error, match="the last turn leaves the model no room"):
        handlers.score_dialog(f"Hi! How was your weekend?\n{long}")


def test_a_batch_with_an_unscored_row_shows_its_table_summary_and_download(tiny_blenderbot_path, monkeypatch, tmp_path):
    """Issue 62, 0: one row too long for any context loses nothing else: the table (its score empty), the summary
    over the scored rows of each system (the pair it belongs to left out and counted), the download that reads
    back, and a status that names the row."""
    from full_metric.faces.webapp import PRESET_CHOICE, _Handlers, scorer_from_env

    monkeypatch.setenv("FULL_MODEL", str(tiny_blenderbot_path))
    handlers = _Handlers(scorer_from_env(), Limits(characters=500_000))
    options = (handlers.scorer.preset, PRESET_CHOICE, "", "", PRESET_CHOICE)
    long = " ".join(f"word{i}" for i in range(400))
    rows = [{"context": [f"Hi {k}!"], "response": long if (s, k) == ("b", 1) else f"Fine {s}{k}.", "system": s}
            for s in ("a", "b") for k in range(4)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    *_, last = handlers.score_file(str(path), None, *options, progress=lambda *a, **k: None)
    table, summary, _, download, _, status = last
    assert table["full"].isna().tolist() == [False] * 5 + [True] + [False] * 2
    assert "1 of 8 rows not scored (row 6)" in status
    by_group = {r["group"]: r for r in summary.to_dict("records")}
    assert by_group["all"]["not scored"] == 1 and by_group["b"]["not scored"] == 1 and by_group["b"]["items"] == 3
    scored = [json.loads(line)["full"] for line in open(download, encoding="utf-8")]
    assert scored[5] is None and by_group["all"]["mean FULL"] == pytest.approx(sum(scored[:5] + scored[6:]) / 7, abs=1e-4)


def test_the_api_section_names_every_endpoint_and_the_menus_exact_labels():
    """Issue 62, 9: docs/app.md's API section lists each api_name the app declares, with its parameters, and the
    follow-up menu's labels as they must be passed."""
    import inspect
    import re
    from pathlib import Path

    from full_metric.faces import webapp

    docs = (Path(__file__).resolve().parents[2] / "docs" / "app.md").read_text(encoding="utf-8")
    declared = re.findall(r'api_name="(\w+)"', inspect.getsource(webapp))
    assert set(declared) == {"score_turn", "score_dialog", "upload_systems", "score_file"}
    for name in declared:
        assert f"| `/{name}` |" in docs, name
    for parameter in ("dialog", "candidates", "upload", "baseline_name", "follow_up_set", "custom_follow_ups"):
        assert f"`{parameter}`" in docs, parameter
    flat = " ".join(docs.split())
    assert f'`"{CUSTOM}"`' in flat and f'`"{PRESET_CHOICE}"`' in flat
