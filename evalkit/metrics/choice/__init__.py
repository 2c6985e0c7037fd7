"""evalkit's multiple-choice scores: the option read from a free answer, or the likeliest option by log-probability."""
