"""What a run spends: usage per record, pair and run (usage), its budget (budget), the dry run's estimate (estimate)."""
