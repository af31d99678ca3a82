"""``python -m full_metric.settings``: the settings table of README.md's Inputs (a module of its own, so that
running it does not execute the settings module a second time after the package imported it)."""

from . import markdown_table

print(markdown_table())
