"""``python -m attnkit ...`` = the ``attnkit`` command (also what ``torchrun -m attnkit
train RECIPE`` starts in each process)."""

from attnkit.app.cli import main

raise SystemExit(main())
