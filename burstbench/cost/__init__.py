"""The cost of a job: prices as data (``prices``), the spot-eviction model (``spot``).

Pure: pandas and numpy, no plotting; the report's cost section (burstbench.report.cost)
draws from it.
"""
