"""JupyterLab as people use it: a notebook saved from JupyterLab (File > Save, or autosave)
is written as it is committed, without outputs, execution counts or the kernel's
language_info, so that opening and running the project's notebooks leaves `git status`
clean.  The outputs stay on the page.  jupyter_server_config.py (read by `make lab`) names
:func:`strip_on_save` as the server's pre-save hook; the git filter of notebooks/ (make
nbstripout) strips the same keys from a notebook saved any other way."""

from __future__ import annotations

#: What is stripped, as the git filter strips it (Makefile: nbstripout).
EXTRA_KEYS = ["metadata.language_info"]


def strip_on_save(model: dict, **kwargs) -> None:
    """Jupyter server pre-save hook: a notebook's content, stripped in place (cell ids
    kept); any other file as it is."""
    if model.get("type") != "notebook" or not model.get("content"):
        return
    import nbformat
    from nbstripout import strip_output

    nb = nbformat.from_dict(model["content"])
    model["content"] = strip_output(nb, keep_output=False, keep_count=False, keep_id=True,
                                    extra_keys=list(EXTRA_KEYS))
