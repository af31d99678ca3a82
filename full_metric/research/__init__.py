"""Research tooling over the FULL core: correlation with human ratings, follow-up ranking, the
reproduction report, log-likelihood tables and the settings study, agreement with people, judge
adaptation, plots.

It imports the core (``full_metric``) and ``full_metric.files`` (the rated-file readers); neither
imports it, so scipy and matplotlib stay here (``pip install full-metric[analysis]``). It registers
its own ``full-metric`` subcommands in :mod:`full_metric.research.commands`, which the command line
reads.
"""
