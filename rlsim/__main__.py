import sys

from rlsim.cli.main import main

sys.exit(main())
