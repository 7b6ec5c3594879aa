"""Conversation memory: per-session turns, drift detection, a hypervector selector, rolling
summaries and a token-budgeted prompt builder."""
