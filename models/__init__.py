"""The domain: what things are and what they cost. Pure Python + pandas; no solver, no cloud."""
