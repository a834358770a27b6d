"""SQL files (views/, datasets/, reports/), loaded by name with importlib.resources."""
