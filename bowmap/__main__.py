import sys

from bowmap.cli import main

sys.exit(main())
