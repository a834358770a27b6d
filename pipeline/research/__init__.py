"""Research: the published figures and what it takes to reproduce them here.

Owns the papers' numbers with their sources (published.py), the reproduction's report rows
(reproduction.py), its time budget on this machine (budget.py) and what each of its steps was
made with, kept in the store so a second machine keeps what is finished (step_records.py).

Imports: pipeline.store and the root helpers.
"""
