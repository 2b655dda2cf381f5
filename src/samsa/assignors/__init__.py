"""samsa.assignors."""
