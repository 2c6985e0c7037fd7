"""Preprocessors (sample -> prompt), prompt add-ons and system prompts."""
