"""``python -m bench``: run the benchmark scenarios."""

from bench.run import main

raise SystemExit(main())
