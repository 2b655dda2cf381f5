"""samsa.cli."""
