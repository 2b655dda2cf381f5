"""samsa.broker."""
