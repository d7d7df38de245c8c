"""Per-target bundle assembly beyond the web default (edge: pi5, android)."""
