"""evalkit's image-question scores: VQA accuracy, ANLS, ChartQA, POPE and CIDEr (ChEF's are in chef/)."""
