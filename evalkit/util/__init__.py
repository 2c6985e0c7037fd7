"""Helpers every layer may use: redact (secrets), jsonutil (fast JSON), atomic (crash-safe file writes)."""
