"""Other tools' configs and names, read as their users write them and translated to evalkit's at the edge.

AU-Harness's config file (auharness), KARMA's dataset and metric names (karma) and KARMA's ``--*-args``
command-line strings (karma_args): each becomes evalkit's config tree or values before validation.
"""
