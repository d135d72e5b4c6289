"""The student edition of the book: the same chapters without solutions (``make book-student``).

Off unless ``XORLIB_STUDENT_EDITION=1``. Then every page's MyST text is rewritten as it is read, by the same
transformation that makes the student notebooks (:func:`xorlib.coursework.render.student_text`): each chapter's
exercise region is rebuilt from the bank with stubs in place of the solutions (the check cells then print "not
answered yet"), and ``{solution}`` blocks, rubrics and ``# BEGIN SOLUTION`` bodies go everywhere. What is executed
and offered as the ``.ipynb`` download is that text; the ``.md`` source download, the repository button and the
launch buttons (which lead to the full sources) are switched off.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath

from sphinx.application import Sphinx
from sphinx.config import Config

__version__ = "1.0"


def student_source(docname: str, text: str) -> str:
    """A page's text in the student edition."""
    from xorlib.coursework.bank import chapter_of, chapter_questions
    from xorlib.coursework.render import strip_solutions, student_text

    chapter = chapter_of(PurePosixPath(docname).name)
    return student_text(text, chapter, book=True) if chapter_questions(chapter) else strip_solutions(text)


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    source[0] = student_source(docname, source[0])


def _config_inited(app: Sphinx, config: Config) -> None:
    config.html_copy_source = False
    options = dict(config.html_theme_options or {})
    options.update(launch_buttons={}, use_repository_button=False, use_edit_page_button=False)
    config.html_theme_options = options


def setup(app: Sphinx) -> dict:
    if os.environ.get("XORLIB_STUDENT_EDITION") == "1":
        app.connect("config-inited", _config_inited)
        app.connect("source-read", _source_read)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
