"""evalkit's text-answer scores: exact match, token-overlap F1, and BLEU, chrF and TER as sacrebleu computes them."""
