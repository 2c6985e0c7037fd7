"""evalkit's scores of answers checked by structure or execution: SQL, function calls, JSON, IFEval."""
