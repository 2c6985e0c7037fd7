"""AU-Harness's prompts, sent as AU-Harness sends them: its general user message, BFCL, Spider and SpokenWOZ."""
