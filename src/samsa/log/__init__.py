"""samsa.log."""
