"""Research: the published figures and what it takes to reproduce them here.

Owns the papers' numbers with their sources (published.py), the reproduction's report rows
(reproduction.py) and its time budget on this machine (budget.py).

Imports: pipeline.store and the root helpers.
"""
