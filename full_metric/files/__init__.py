"""Files and processes around the scoring core: the one row reader and writer of dialog files,
corpus scoring (streamed, resumable, sharded), the distributed helpers, the human-rated files."""
