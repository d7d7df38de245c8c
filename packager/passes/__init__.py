"""Graph passes: small, pure functions over the analyzed graph, each with its own test."""
