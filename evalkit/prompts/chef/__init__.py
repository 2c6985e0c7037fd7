"""ChEF's prompts and recipes: SEED-Bench and Winoground sets, multi-turn Omnibenchmark, CoT, robustness variants."""
