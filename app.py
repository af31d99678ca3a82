"""The FULL Space: ``python app.py`` serves it locally (FULL_MODEL / FULL_GGUF_FILE pick the model;
FULL_LIMIT_<NAME> environment variables set the limits of ``full_metric.faces.webapp.LIMIT_SETTINGS``)."""

import logging
import os
from pathlib import Path

from full_metric.faces.webapp import Limits, build_app, scorer_from_env

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
limits = Limits.from_env()
demo = build_app(scorer_from_env(), limits, card=Path(__file__).with_name("README.md"))  # the Space's card

if __name__ == "__main__":
    port = os.environ.get("GRADIO_SERVER_PORT")
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(port) if port else None,  # unset: Gradio picks a free port and prints its URL
        max_file_size=limits.upload_bytes,  # the server refuses larger uploads before the app reads them
    )
