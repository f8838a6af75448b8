# JupyterLab for this repository (make lab passes it with --config): a notebook saved from
# the browser, by File > Save or by autosave, is written without outputs, as committed
# (burstbench/lab.py), so git status stays clean; checkpoints go to the ignored
# .ipynb_checkpoints/.
c = get_config()  # noqa: F821 -- defined by Jupyter when it reads this file
c.FileContentsManager.pre_save_hook = "burstbench.lab.strip_on_save"
