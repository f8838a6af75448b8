"""The report: every figure and table rebuilt from data/ alone (no measuring here).

Each report notebook (notebooks/1xx_report_*) builds one section: a benchmark's
(its ``report`` module, via the registry) or the cost section (``cost``).  A section
reads every run under the runs folder and the study's tables under data/reference/,
writes figures (PNG + SVG, each with a caption naming its data, ``style``) and tables
(CSV + Markdown, ``tables``) and a manifest (``sections``) that ``index`` turns into
figures/README.md.  ``executor`` runs the report notebooks in a few warm kernels (what
``burstbench report`` does); ``explore`` puts runs side by side for notebook 200.
"""
