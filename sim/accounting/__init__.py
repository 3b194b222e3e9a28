"""Accounting: the energy ledger, job records, metrics."""
