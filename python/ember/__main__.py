"""`python -m ember ...` is the `ember` command (ember/cli.py)."""
import sys

from .cli import main

sys.exit(main())
