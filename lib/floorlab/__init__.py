"""floorlab: the library behind the book Below the Floor."""
