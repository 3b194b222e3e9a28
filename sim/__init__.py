"""The offline replay: an event engine on sortedcontainers, queue strategies, the energy ledger,
metrics and the rich report.  Depends on clustermodel (and on acceptance/allocation policies);
never on traces readers or the CLI."""
