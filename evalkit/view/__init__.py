"""`evalkit view`: a local web viewer of runs, their results and every sample behind them.

It reads a run folder only (run.json, results.json, records/), never the
response store, so a copied run folder is enough. Big records files are read
through an SQLite index kept in evalkit's cache folder, never in the run
folder (it may be read-only or someone else's).
"""
