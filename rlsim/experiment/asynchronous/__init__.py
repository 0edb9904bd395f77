"""The contention experiment under ``schedule: async``: the together condition and its outcomes.

``condition`` (one whole async pipeline per repeat on each runtime's actors), ``analysis`` (rollouts trained
per hour, staleness and trainer idle time, each paired with the baseline).
"""
