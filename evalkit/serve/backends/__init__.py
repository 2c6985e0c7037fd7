"""Model backends behind ``evalkit serve``; each is imported only when chosen."""
