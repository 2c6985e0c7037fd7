"""Pairs that end before their last sample, on purpose: ``stop_at_ci`` (:mod:`evalkit.run.stopping.at_ci`).

A result that is over fewer samples than its plan's says so in results.json's and run.json's ``partial``, with
its reason, and every table shows it beside its ``n``.
"""
