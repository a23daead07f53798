"""console.views.diff_files reads a unified diff: git's header lines are skipped, and only them (a
removed SQL comment "-- x" is a "--- x" line inside a hunk, and it is the file's)."""
import re

from lonca.console.views import diff_files

DIFF = """diff --git a/q.sql b/q.sql
index 1111111..2222222 100644
--- a/q.sql
+++ b/q.sql
@@ -1,3 +1,3 @@
--- the old note
+++ the new note
 select 1;
-select 2;
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
"""


def test_lines_that_look_like_headers_inside_a_hunk_are_shown():
    files = diff_files(DIFF)
    q = [(kind, old, new) for kind, old, new, _html in files["q.sql"]]
    assert q == [("hunk", "", ""), ("del", 1, ""), ("add", "", 1), ("ctx", 2, 2), ("del", 3, "")]
    text = [re.sub(r"<[^>]+>", "", str(html)) for _k, _o, _n, html in files["q.sql"]]
    assert text[1] == "-- the old note" and text[2] == "++ the new note"
    assert [(k, o, n) for k, o, n, _ in files["new.txt"]] == [("hunk", "", ""), ("add", "", 1)]
