"""samsa.coordinator."""
