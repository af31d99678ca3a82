"""The faces over the core: the ``evaluate`` modules (``metric``, ``comparison_metric``), the
command line (``cli``), the Gradio app (``webapp``) and the Trainer / TRL helpers (``training``).
Nothing in the core or ``files`` imports them."""
