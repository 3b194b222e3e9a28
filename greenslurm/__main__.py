"""``python -m greenslurm``: the same as the ``greenslurm`` command."""

import sys

from greenslurm.cli import main

if __name__ == "__main__":
    sys.exit(main())
