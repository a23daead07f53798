"""The forge page in real Chromium (issue 14, "Bridges to the forge" and "Backup and restore"):
each button is one signing with the virtual authenticator, and its effect is checked outside the
console: a push lands trunk in a real bare remote, an import brings back
what a developer pushed there, a backup writes a bundle git reads, a restore brings that bundle back on a second worker
(another home, the daemon key file carried over, as a machine's restore does) whose offline audit
passes. axe-core finds nothing serious on the page at both sizes."""
import re
import subprocess
from pathlib import Path

from playwright.sync_api import expect

from conftest import git, git_repo
from console.browser_steps import bootstrap, sign
from console.test_accessibility import VIEWPORTS, axe_source, violations  # noqa: F401 (axe_source: a fixture)
from test_backup_restore import fresh_worker

APP = "def charge(amount):\n    return amount * 2\n"


def test_import_push_backup_and_restore_from_the_console(stack, new_page, make_console, tmp_path, axe_source):  # noqa: F811
    worker, console = stack
    upstream = git_repo(tmp_path / "upstream", {"app.py": APP})
    page, _key = new_page()
    bootstrap(page, console, "alice", "demo", import_from=str(upstream))
    page.goto(console.url + "/r/demo/forge")
    expect(page.locator("nav a[aria-current=page]")).to_have_text("Forge")

    refused = sign(page, "#import", remote=str(upstream))  # nothing new upstream
    assert "up_to_date" in refused, refused

    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    pushed = sign(page, "#push", remote=str(bare))
    assert "push trunk of demo" in pushed and "allow" in pushed, pushed
    expect(page.locator("#push pre.push-output")).to_contain_text("refs/heads/main")
    assert git("rev-parse", "main", cwd=bare) == git("rev-parse", "HEAD", cwd=upstream)

    # a developer works on the remote Lonca pushed to; the import brings that in
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(bare), str(clone)], check=True)
    (clone / "fees.py").write_text("def fee(x):\n    return x + 1\n")
    git("add", ".", cwd=clone)
    git("commit", "-qm", "fees", cwd=clone)
    git("push", "-q", "origin", "HEAD:main", cwd=clone)
    head = git("rev-parse", "HEAD", cwd=clone)
    done = sign(page, "#import", remote=str(bare), branch="main")  # a bare from `git init --bare`: HEAD names master
    assert f"import {head[:12]}" in done and "allow" in done, done
    page.reload()
    expect(page.locator("main p code").first).to_have_text(head[:12])  # trunk is the imported commit

    backed = sign(page, "#backup")
    m = re.search(r"written to (\S+\.bundle)", backed)
    assert m and "back up demo" in backed, backed
    bundle = Path(m[1])
    heads = subprocess.run(["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True).stdout
    assert f"{head} refs/heads/main" in heads and "refs/lonca/log" in heads

    for vp in VIEWPORTS:
        page.set_viewport_size(vp)
        page.goto(console.url + "/r/demo/forge")
        assert violations(page, axe_source) == [], vp
    page.set_viewport_size(VIEWPORTS[0])

    # another machine: its own home and first repository, the daemon key file carried over
    other = fresh_worker(tmp_path, "machine-b", worker.env["LONCA_HUMANS"], key_from=worker.home / "daemon.key")
    try:
        console_b = make_console(other)
        page_b, _key_b = new_page()
        bootstrap(page_b, console_b, "alice", "first")
        page_b.goto(console_b.url + "/r/first/forge")
        restored = sign(page_b, "#restore", repo="demo", **{"from": str(bundle)})
        assert "restore demo from" in restored and "restored, log verified" in restored, restored
        again = sign(page_b, "#restore", repo="demo", **{"from": str(bundle)})
        assert "exists" in again, again  # conflict: a restore never overwrites
        res = other.cli("audit", "verify")
        assert res.returncode == 0, res.stderr
        assert "demo" in res.stdout + res.stderr
    finally:
        other.stop()
