"""``python -m structgen.bench ...``: see :func:`structgen.bench.main`."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
