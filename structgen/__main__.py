"""``python -m structgen``: the ``structgen`` command (:func:`structgen.cli.main`)."""
import sys

from .cli import main

sys.exit(main())
