"""An OpenAI-compatible inference server for local models (``evalkit serve``)."""
