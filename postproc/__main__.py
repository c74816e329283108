import sys

from postproc.cli import main

sys.exit(main())
