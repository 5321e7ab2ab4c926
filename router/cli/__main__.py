"""``python -m router.cli``: the same as the ``switchboard`` command."""

import sys

from router.cli import main

sys.exit(main())
