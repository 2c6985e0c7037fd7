"""ChEF's (OpenGVLab/LAMM) exact computations under its metric names: task metrics, VQA/MME/MMBench, Winoground, ECE."""
