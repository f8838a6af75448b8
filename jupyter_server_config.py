# JupyterLab for this repository (make lab passes it with --config): a notebook saved from
# the browser, by File > Save or by autosave, is written without outputs, as committed
# (burstbench/lab.py), so git status stays clean; a notebook opens unmodified (it reaches the
# page with the kernel's language_info, which the save strips again); checkpoints go to the
# ignored .ipynb_checkpoints/.
from burstbench.lab import contents_manager

c = get_config()  # noqa: F821 -- defined by Jupyter when it reads this file
c.ServerApp.contents_manager_class = contents_manager()
c.FileContentsManager.pre_save_hook = "burstbench.lab.strip_on_save"
