"""AU-Harness's exact computations under its names: judges, diarization, GSM8K, SpokenWOZ, METEOR/BERTScore/COMET."""
