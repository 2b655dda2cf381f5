"""samsa.protocol."""
