"""KARMA-OpenMedEvalKit's row selections and prompts, and its prompt data (medical_history_summary.yaml)."""
