"""`python -m floorlab measure | doctor | bench`: the book's commands."""
import sys

from floorlab.tools.cli import main

sys.exit(main())
