from evalkit.cli.entry import console

raise SystemExit(console())
