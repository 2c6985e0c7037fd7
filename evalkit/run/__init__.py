"""Running a plan: runner (a whole run), manifest (run.json, resume), engine (one dataset-metric pair),
requests (model requests from prompts), scoring (one score-and-record path), dryrun, rescore."""
