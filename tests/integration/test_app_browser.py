"""End to end: the Space app on 127.0.0.1 with the tiny model, driven by headless Chromium."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from full_metric import FullScorer

from ..app_server import running_app

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic"]
DIALOG = "Hi! How was your weekend?\nIt was nice, I went to the beach. And yours?"
CANDIDATES = ["Mine was good too, I finally finished painting my kitchen.", "The capital of Australia is Canberra."]

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (uses Debian's chromium)")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def app_url(tiny_blenderbot_path, tmp_path_factory):
    with running_app(tiny_blenderbot_path, tmp_path_factory.mktemp("app") / "app.log") as url:
        yield url


def _not_blank(path: Path) -> None:
    """A screenshot with content: the page's own size and more than a few colours."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        assert image.size[0] == 1280 and image.size[1] >= 600
        assert len(np.unique(np.asarray(image.convert("L")))) > 20


def test_turn_dialog_preset_and_batch_in_a_browser(app_url, tiny_blenderbot_path, tmp_path):
    # as the app makes its scorer: speaker labels stripped (FULL_STRIP_SPEAKER_PREFIXES unset)
    scorer = FullScorer(tiny_blenderbot_path, device="cpu", progress=False, strip_speaker_prefixes=True)
    expected = scorer.score([DIALOG.splitlines()] * 2, CANDIDATES).scores
    best = CANDIDATES[0] if expected[0] > expected[1] else CANDIDATES[1]
    whole = DIALOG.splitlines() + [CANDIDATES[0]]
    dialog_mean = scorer.score([whole], aggregation="mean").scores[0]
    upload = tmp_path / "dialogs.jsonl"
    upload.write_text("".join(json.dumps(r) + "\n" for r in [
        {"context": ["Hi!"], "response": "Hello there, nice to meet you.", "system": "bot-a"},
        {"context": ["Hi!"], "response": "Purple seventeen umbrella.", "system": "bot-b"},
    ]))
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1800})
        page.goto(app_url, timeout=60_000)
        playwright_api.expect(page.get_by_text("Model: tiny-blenderbot")).to_be_visible(timeout=60_000)
        assert str(tiny_blenderbot_path) not in page.content()  # the name, never the local path
        page.locator("#turn-dialog textarea").fill(DIALOG)
        page.locator("#turn-candidates textarea").fill("\n".join(CANDIDATES))
        page.locator("#turn-score").click()
        ranked = page.locator("#turn-ranked")
        playwright_api.expect(ranked).to_contain_text(CANDIDATES[1], timeout=60_000)
        playwright_api.expect(ranked).to_contain_text(CANDIDATES[0])
        text = ranked.inner_text()
        other = CANDIDATES[1] if best == CANDIDATES[0] else CANDIDATES[0]
        assert text.index(best) < text.index(other)  # ranked best first
        assert f"{max(expected):.3f}" in text  # rounded for display
        page.screenshot(path=str(tmp_path / "app-turn.png"), full_page=True)

        # the preset menu lists the presets that fit the model; the aggregation changes the dialog score
        page.locator("#settings .label-wrap").click()
        page.locator("#preset input").click()
        options = page.get_by_role("option")
        playwright_api.expect(options.first).to_be_visible()
        listed = {text.split("\n")[-1] for text in options.all_inner_texts()}  # "✓\npaper" for the chosen one
        assert listed == {"paper", "reference"}  # not the family presets of other models (smollm2, gemma3)
        page.keyboard.press("Escape")
        page.get_by_label("Aggregation").click()
        page.get_by_role("option", name="mean", exact=True).click()
        page.get_by_role("tab", name="Score a dialog").click()
        page.locator("#dialog-text textarea").fill("\n".join(whole))
        page.locator("#dialog-score").click()
        # a number (gr.Number, 3 decimals), not text
        playwright_api.expect(page.locator("#dialog-result input")).to_have_value(str(round(dialog_mean, 3)),
                                                                                  timeout=60_000)
        playwright_api.expect(page.locator("#dialog-signature textarea")).to_have_value(
            scorer.signature(level="dialog", aggregation="mean"))

        page.get_by_role("tab", name="Batch").click()
        page.locator("#batch-upload input[type=file]").set_input_files(str(upload))
        page.locator("#batch-score").click()
        table = page.locator("#batch-table")
        playwright_api.expect(table).to_contain_text("Purple seventeen umbrella.", timeout=60_000)
        playwright_api.expect(table).to_contain_text("Hello there, nice to meet you.")
        playwright_api.expect(page.locator("#batch-status textarea")).to_have_value("all 2 rows scored")
        summary = page.locator("#batch-summary")
        playwright_api.expect(summary).to_contain_text("bot-a")
        for word in ("all", "bot-b", "mean FULL", "CI low", "p (Holm)", "baseline"):
            assert word in summary.inner_text()
        playwright_api.expect(page.locator("#batch-chart img")).to_have_count(1)  # the means with intervals
        page.screenshot(path=str(tmp_path / "app-batch.png"), full_page=True)
        browser.close()
    _not_blank(tmp_path / "app-turn.png")
    _not_blank(tmp_path / "app-batch.png")
