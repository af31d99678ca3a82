"""End to end: the Space app on 127.0.0.1 with the tiny model, driven by headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from full_metric import FullScorer

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic"]
DIALOG = "Hi! How was your weekend?\nIt was nice, I went to the beach. And yours?"
CANDIDATES = ["Mine was good too, I finally finished painting my kitchen.", "The capital of Australia is Canberra."]

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (uses Debian's chromium)")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tiny_blenderbot_path, tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("app") / "app.log"
    env = {**os.environ, "FULL_MODEL": str(tiny_blenderbot_path), "FULL_DEVICE": "cpu", "GRADIO_SERVER_PORT": str(port),
           "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO)}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the app exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail(f"the app did not start: {log.read_text()[-2000:]}")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_score_compare_and_batch_in_a_browser(app_url, tiny_blenderbot_path, tmp_path):
    expected = FullScorer(tiny_blenderbot_path, device="cpu", progress=False).score(
        [DIALOG.splitlines()] * 2, CANDIDATES).scores
    best = CANDIDATES[0] if expected[0] > expected[1] else CANDIDATES[1]
    upload = tmp_path / "dialogs.jsonl"
    upload.write_text("".join(json.dumps(r) + "\n" for r in [
        {"context": ["Hi!"], "response": "Hello there, nice to meet you.", "system": "bot-a"},
        {"context": ["Hi!"], "response": "Purple seventeen umbrella.", "system": "bot-b"},
    ]))
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1800})
        page.goto(app_url, timeout=60_000)
        page.locator("#turn-dialog textarea").fill(DIALOG)
        page.locator("#turn-candidates textarea").fill("\n".join(CANDIDATES))
        page.locator("#turn-score").click()
        ranked = page.locator("#turn-ranked")
        playwright_api.expect(ranked).to_contain_text(CANDIDATES[1], timeout=60_000)
        playwright_api.expect(ranked).to_contain_text(CANDIDATES[0])
        text = ranked.inner_text()
        other = CANDIDATES[1] if best == CANDIDATES[0] else CANDIDATES[0]
        assert text.index(best) < text.index(other)  # ranked best first
        page.screenshot(path=str(tmp_path / "app-turn.png"), full_page=True)

        page.get_by_role("tab", name="Batch").click()
        page.locator("#batch-upload input[type=file]").set_input_files(str(upload))
        page.locator("#batch-score").click()
        table = page.locator("#batch-table")
        playwright_api.expect(table).to_contain_text("Purple seventeen umbrella.", timeout=60_000)
        playwright_api.expect(table).to_contain_text("Hello there, nice to meet you.")
        summary = page.locator("#batch-summary")
        playwright_api.expect(summary).to_contain_text("bot-a")
        for word in ("all", "bot-b", "mean FULL", "CI low", "p (Holm)", "baseline"):
            assert word in summary.inner_text()
        playwright_api.expect(page.locator("#batch-chart img")).to_have_count(1)  # the means with intervals
        page.screenshot(path=str(tmp_path / "app-batch.png"), full_page=True)
        browser.close()
    assert (tmp_path / "app-turn.png").stat().st_size > 10_000
