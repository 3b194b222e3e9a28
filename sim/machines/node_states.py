"""The power states of a node: ON (idle power plus its jobs), OFF and BOOTING (Slurm's power_save:
POWERED_DOWN and POWERING_UP)."""

ON, OFF, BOOTING = 0, 1, 2
STATE_NAMES = ("on", "off", "booting")
