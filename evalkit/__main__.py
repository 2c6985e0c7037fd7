from evalkit.cli.main import main

raise SystemExit(main())
