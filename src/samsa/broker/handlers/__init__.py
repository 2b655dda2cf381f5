"""samsa.broker.handlers."""
