"""`python -m byref.cli`: the `byref` command line."""

import sys

from byref.cli import main

sys.exit(main())
