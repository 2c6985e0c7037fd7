"""Dataset loading, samples, filters and audio handling."""
