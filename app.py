"""The FULL Space: ``python app.py`` serves it locally (FULL_MODEL / FULL_GGUF_FILE pick the model)."""

import os

from full_metric.webapp import build_app, scorer_from_env

demo = build_app(scorer_from_env())

if __name__ == "__main__":
    demo.launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )
