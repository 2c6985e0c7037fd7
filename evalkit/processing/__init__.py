"""Text processing between a model's response and a metric: postprocessors and normalizers.

Submodules are imported where they are used, so importing this package stays cheap.
"""
