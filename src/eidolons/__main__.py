"""``python -m eidolons``."""

import sys

from eidolons.cli import main

sys.exit(main())
