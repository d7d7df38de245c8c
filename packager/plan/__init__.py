"""The plan: the binary program every edgepack runtime executes (see docs/plan-format.md)."""
