"""``python -m evalkit.serve ...`` is ``evalkit serve ...``."""

import sys

from evalkit.serve.cli import main

if __name__ == "__main__":
    sys.exit(main())
