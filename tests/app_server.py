"""Starting the real app (``python app.py``) on a port the server picks, for the browser and load tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
URL = re.compile(r"Running on local URL:\s*(http://\S+)")


@contextmanager
def running_app(model: Path, log: Path, timeout: float = 180, **env: str) -> Iterator[str]:
    """Serve the app with ``model`` (no port given: Gradio binds a free one and prints its URL, which
    is read back from the output as the readiness signal); yields the URL, stops the server after."""
    environ = {**os.environ, "FULL_MODEL": str(model), "FULL_DEVICE": "cpu", "GRADIO_SERVER_NAME": "127.0.0.1",
               "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO),
               "PYTHONUNBUFFERED": "1", **env}
    environ.pop("GRADIO_SERVER_PORT", None)
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=environ, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:  # keep reading (a full pipe would block the server), note the URL
        with open(log, "w") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                match = URL.search(line)
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not ready.wait(timeout) or not found:
            raise RuntimeError(f"the app did not start in {timeout} s: {log.read_text()[-3000:]}")
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
