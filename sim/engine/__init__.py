"""The event engine: the event order, the loop, queue strategies and the plan profile."""
