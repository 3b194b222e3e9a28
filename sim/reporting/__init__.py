"""Reporting: the rich terminal report and the files a replay writes."""
