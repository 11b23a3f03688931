"""Tools wing: `python -m floorlab bench`: measure, print the table, write the JSON."""
import sys

from .cli import main

sys.exit(main())
