"""KARMA-OpenMedEvalKit's exact computations under its metric names: ASR, text, retrieval, bias, judges, rubrics."""
