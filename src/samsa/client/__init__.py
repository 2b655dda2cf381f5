"""samsa.client."""
