"""``python -m attnkit.app.cli ...`` = the ``attnkit`` command."""

import sys

from attnkit.app.cli import main

sys.exit(main())
