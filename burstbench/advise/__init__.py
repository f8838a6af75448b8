"""Burst advice on a live queue: which pending jobs of Slurm or PBS to send to the cloud, at
what price and how sure (``burstbench advise``), and moving them (``--apply``)."""
