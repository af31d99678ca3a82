"""Research tooling over the FULL core: correlation with human ratings, human-rated files, follow-up
ranking, the reproduction report, log-likelihood tables and the settings study, plots.

It imports the core (``full_metric``); the core never imports it, so scipy and matplotlib stay
here (``pip install full-metric[analysis]``). The command line reaches it through its
``correlate``, ``rank-follow-ups``, ``report``, ``score-candidates`` and ``study`` commands.
"""
