"""`python -m evermind_vk ...` runs the evermind-vk command."""
import sys

from .cli import main

sys.exit(main())
