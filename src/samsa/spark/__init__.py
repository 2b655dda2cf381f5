"""samsa.spark."""
