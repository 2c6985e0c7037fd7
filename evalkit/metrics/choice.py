"""Work in progress."""
