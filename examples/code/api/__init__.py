"""HTTP layer of the example service."""
