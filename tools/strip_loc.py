"""One-off refactoring aid: drop ``loc`` plumbing from lowering modules (issue 9)."""

import re
import sys
from pathlib import Path

for path in sys.argv[1:]:
    s = Path(path).read_text()
    # FX-node-form signatures keep their loc parameter until they are rewritten
    s = re.sub(r"(values_map: ValuesMap, node: torch\.fx\.Node,\s*)loc: Location", r"\1LOC_KEEP", s)
    s = re.sub(r",\s*loc=loc(?=\s*[,)])", "", s)
    s = re.sub(r"\(loc=loc\)", "()", s)
    s = re.sub(r",\s*loc\)", ")", s)
    s = re.sub(r"\(loc\)", "()", s)
    s = re.sub(r",\s*loc: Location(?: \| None)?(?: = None)?(?=[,)])", "", s)
    s = re.sub(r"\(loc: Location(?: \| None)?(?: = None)?\)", "()", s)
    s = s.replace("LOC_KEEP", "loc: Location")
    Path(path).write_text(s)
