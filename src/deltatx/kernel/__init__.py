"""The Delta protocol, pure: standard library only, no I/O."""
