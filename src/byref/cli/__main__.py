import sys

from byref.cli import main

sys.exit(main())
