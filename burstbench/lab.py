"""JupyterLab as people use it: a notebook saved from JupyterLab (File > Save, or autosave)
is written as it is committed, without outputs, execution counts or the kernel's
language_info, so that opening and running the project's notebooks leaves `git status`
clean.  The outputs stay on the page.  jupyter_server_config.py (read by `make lab`) names
:func:`strip_on_save` as the server's pre-save hook; the git filter of notebooks/ (make
nbstripout) strips the same keys from a notebook saved any other way.

A notebook opens as saved, not as changed: JupyterLab marks a notebook modified the moment
its kernel's language_info differs from the file's, and the committed files carry none (it
names the Python version, which differs from machine to machine).  The server's contents
manager (:func:`contents_manager`) hands each notebook to the page with this environment's
kernel's language_info, which the pre-save hook strips again.
"""

from __future__ import annotations

from typing import Any

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


def kernel_language_info() -> dict:
    """The language_info this environment's IPython kernel reports (the kernel `make lab`
    starts runs this environment's Python)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def with_language_info(model: dict) -> dict:
    """A contents model as the page should get it: a notebook without language_info gains
    the kernel's (so that opening it changes nothing); anything else as it is."""
    content = model.get("content")
    if model.get("type") == "notebook" and isinstance(content, dict):
        content.setdefault("metadata", {}).setdefault("language_info", kernel_language_info())
    return model


def contents_manager() -> Any:
    """The server's contents manager (jupyter_server_config.py): the default one, whose
    notebooks reach the page with the kernel's language_info (with_language_info)."""
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    class ContentsManager(AsyncLargeFileManager):
        async def get(self, path, content=True, type=None, format=None, require_hash=False):
            return with_language_info(await super().get(
                path, content=content, type=type, format=format, require_hash=require_hash))

    return ContentsManager
