"""`python -m evermind_vk.cli ...` runs the evermind-vk command."""
import sys

from . import main

sys.exit(main())
