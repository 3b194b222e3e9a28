"""Studies built on the engine: Monte Carlo inflation, timed GPU replays, admission grids."""
