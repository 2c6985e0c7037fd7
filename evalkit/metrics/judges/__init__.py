"""evalkit's LLM-judge scores (binary, 0-5, rubrics) and reading a verdict; peers' judges are in their folders."""
