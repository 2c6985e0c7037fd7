"""Per-sample records, results files and tables."""
