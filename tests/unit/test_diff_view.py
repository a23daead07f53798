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
    # after the last hunk, a gap row: the rest of the file, whose length the diff does not say
    assert q == [("hunk", "", ""), ("del", 1, ""), ("add", "", 1), ("ctx", 2, 2), ("del", 3, ""), ("gap", 3, 0)]
    text = [re.sub(r"<[^>]+>", "", str(html)) for _k, _o, _n, html in files["q.sql"][:-1]]
    assert text[1] == "-- the old note" and text[2] == "++ the new note"
    assert [(k, o, n) for k, o, n, _ in files["new.txt"]] == [("hunk", "", ""), ("add", "", 1)]   # nothing hidden


# a 60-line file: line 10 changed, line 50 removed, a line added after line 55
FILE = [f"line {i}" for i in range(1, 61)]
NEW = FILE[:9] + ["line ten"] + FILE[10:49] + FILE[50:55] + ["added"] + FILE[55:]
TWO_HUNKS = """diff --git a/f.py b/f.py
index 1111111..2222222 100644
--- a/f.py
+++ b/f.py
@@ -7,7 +7,7 @@
 line 7
 line 8
 line 9
-line 10
+line ten
 line 11
 line 12
 line 13
@@ -47,12 +47,12 @@
 line 47
 line 48
 line 49
-line 50
 line 51
 line 52
 line 53
 line 54
 line 55
+added
 line 56
 line 57
 line 58
"""


def test_the_hidden_lines_between_hunks_are_gap_rows_with_their_numbers():
    rows = diff_files(TWO_HUNKS)["f.py"]
    gaps = [(o, n, html) for k, o, n, html in rows if k == "gap"]
    # (first, last, shift) of the new side, shift = new - old: a line removed and one added in
    # the second hunk leave the end of the file at the same numbers
    assert gaps == [(1, 6, 0), (14, 46, 0), (59, 0, 0)]
    assert rows[0][0] == "gap" and rows[1][0] == "hunk"


def test_expanding_a_gap_gives_context_rows_and_keeps_the_rest_hidden():
    from lonca.console import expand
    new = NEW

    def ask(**kw):
        q = {"commit": "a" * 40, "path": "f.py", "split": "0", "links": "0", **{k: str(v) for k, v in kw.items()}}
        return expand.Ask.parse(q)
    html = str(expand.rows("demo", ask(**{"from": 14, "to": 46, "shift": 0, "take": "down"}), new))
    numbers = re.findall(r'<tr class="ctx"><td class="n">(\d+)</td><td class="n">(\d+)</td>', html)
    assert numbers == [(str(i), str(i)) for i in range(14, 34)]
    assert 'data-gap="34-46"' in html and html.index('data-gap="34-46"') > html.index(">33<")
    html = str(expand.rows("demo", ask(**{"from": 34, "to": 46, "shift": 0, "take": "all"}), new))
    assert "gap" not in html and re.sub(r"<[^>]+>", "", html).count("line") == 13
    # the end of the file, whose length only the file says
    html = str(expand.rows("demo", ask(**{"from": 59, "to": 0, "shift": 0, "take": "all"}), new))
    assert re.findall(r'<td class="n">(\d+)</td><td class="n">(\d+)</td>', html) == [("59", "59"), ("60", "60")]
    assert re.findall(r"<code>(.*?)</code>", re.sub(r"</?span[^>]*>", "", html)) == ["line 59", "line 60"]
    # old numbers follow the shift: a gap after a hunk that removed two lines
    html = str(expand.rows("demo", ask(**{"from": 20, "to": 21, "shift": -2, "take": "all"}), new))
    assert re.findall(r'<td class="n">(\d+)</td><td class="n">(\d+)</td>', html) == [("22", "20"), ("23", "21")]
    # side by side: four cells a row, the hidden rest before the lines shown for "up"
    html = str(expand.rows("demo", ask(**{"from": 1, "to": 6, "shift": 0, "take": "up", "split": 1}), new))
    assert html.count('<tr class="ctx">') == 6 and html.count('<td class="code">') == 12


def test_a_gap_request_is_checked_at_the_edge():
    import pytest
    from lonca.console import expand
    good = {"commit": "a" * 40, "path": "f.py", "from": "1", "to": "0", "shift": "0", "take": "all"}
    for bad in ({"commit": "xyz"}, {"take": "sideways"}, {"from": "0"}, {"to": "-1"}, {"from": "5", "to": "4"},
                {"shift": "1e9"}, {"path": ""}):
        with pytest.raises(ValueError):
            expand.Ask.parse({**good, **bad})


def test_the_diff_writes_spans_only_for_the_classes_the_stylesheet_colours():
    from pathlib import Path
    from lonca.console import views
    css = (Path(__file__).resolve().parents[2] / "static" / "lonca.css").read_text()
    block = css.split("/* Pygments token classes", 1)[1].split("@media", 1)[0]
    assert set(re.findall(r"\.([a-z0-9]+)\b", block.split("*/", 1)[1])) == views.COLOURED
    html = "".join(str(h) for h in views.highlight_lines("x.py", ["def f(x):", "    return x + 1  # one"]))
    assert set(re.findall(r'class="([^"]+)"', html)) == {"k", "nf", "o", "mi", "c1"}
    assert re.sub(r"<[^>]+>", "", html) == "def f(x):    return x + 1  # one"
