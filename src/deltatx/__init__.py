"""deltatx."""
