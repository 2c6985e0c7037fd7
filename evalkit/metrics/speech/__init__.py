"""evalkit's speech scores: WER, CER, cpWER and WDER (KARMA's and AU-Harness's are in karma/ and auharness/)."""
