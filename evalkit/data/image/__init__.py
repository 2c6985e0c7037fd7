"""Images, carried encoded until needed.

values: dataset cells -> Image (no decoding); codec: Pillow probe, downsize, re-encode;
prepare: the data URIs every model of an engine sends, made once per sample off the loop
(in a thread when no image needs a resize, else in the worker processes).
"""
