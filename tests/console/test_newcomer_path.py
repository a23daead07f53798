"""The newcomer's path, as the README walks it, end to end in a real Chromium and the real CLI:
a passkey bootstraps a repository from a source whose default branch is not `main`; the console
enrols a file key for the CLI and a second passkey; the CLI creates a second repository with
that file key and the console a third (hardened); the console starts an agent session whose
workspace the CLI makes from the token shown once; the agent proposes from it, the browser
approves, and the change integrates."""
import base64
import json
import re
from pathlib import Path

from playwright.sync_api import expect

from conftest import git, git_repo
from console.browser_steps import bootstrap, login, sign
from console.test_webauthn_console import shot, token_of


def source(path, branch: str, files: dict[str, str]):
    """A git repository whose only branch, and so its default, is `branch`."""
    git_repo(path, files)
    git("branch", "-m", "main", branch, cwd=path)
    return path


def copy(page, button) -> str:
    """Click a copy button and read back what it put on the clipboard."""
    button.click()
    expect(button).to_have_text("Copied")
    return page.evaluate("navigator.clipboard.readText()")


def test_bootstrap_enrol_cli_key_new_repositories_agent_session_approve_integrate(stack, new_page, tmp_path):
    worker, console = stack
    src = source(tmp_path / "billing", "trunk", {
        "app.py": "def charge(amount):\n    return amount * 2\n",
        "lonca.toml": '[review]\nagent_changes = "human"\n'})   # every agent change waits for a human
    page, authenticator = new_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)

    # 1. a passkey bootstraps `demo` from the source's default branch (`trunk`, not `main`)
    bootstrap(page, console, "alice", "demo", import_from=str(src))
    trunk = git("rev-parse", "trunk", cwd=src)
    with worker.client() as c:
        assert c.call("ping")["bootstrap"] is False
    page.goto(console.url + "/repos")
    expect(page.locator("[data-repo=demo]")).to_contain_text(trunk[:12])

    # 2. the CLI's file key: refused before it is enrolled, with what to do
    refused = worker.cli("init", "second", "--human", "alice-cli", "--import", str(src))
    assert refused.returncode == 1 and "Is this key enrolled?" in refused.stderr, refused.stderr
    page.goto(console.url + "/keys")
    command = copy(page, page.locator("button[data-copy='#keygen-command']"))
    assert command == "lonca human key --human alice-cli"
    made = worker.cli(*command.split()[1:], check=True)      # the command the console shows, as shown
    public = made.stdout.strip()
    assert re.fullmatch(r"ed25519:[0-9a-f]{64}", public), made.stdout
    fingerprint = re.search(r"fingerprint ([0-9a-f ]{19})", made.stderr).group(1)
    result = sign(page, "#enrol-file-key", public=public)
    assert "allow" in result and fingerprint in result, result
    page.reload()
    expect(page.locator(".keys tr[data-repo=demo]")).to_contain_text(fingerprint)
    shot(page, "keys")

    # 3. with it the CLI logs in and creates a second repository, from the source's default branch
    made = worker.cli("init", "second", "--human", "alice-cli", "--import", str(src), "--json", check=True)
    created = json.loads(made.stdout)
    assert created["trunk"] == trunk and created["branch"] == "trunk" and created["decision"]["outcome"] == "allow"

    # 4. the console creates a third repository, hardened, empty
    page.goto(console.url + "/repos")
    page.select_option("#new-repo-profile", "hardened")
    page.fill("#new-repo-name", "third")
    page.click("#new-repo button[type=submit]")
    page.wait_for_url(re.compile(r"/r/third/review$"))
    page.goto(console.url + "/repos")
    expect(page.locator("[data-repo=third] h2")).to_contain_text("hardened")
    expect(page.locator("[data-repo=second]")).to_have_count(0)     # alice-cli's; alice's passkey is not in it
    worker.cli("human", "enrol", "alice", "--as-in", "demo", "--repo", "second", "--human", "alice-cli", check=True)
    page.reload()
    expect(page.locator("[data-repo=second]")).to_contain_text("alice-cli")

    # 5. a second passkey, registered and enrolled by the first
    page.goto(console.url + "/keys")
    before = len(authenticator.credentials())
    form = page.locator("#enrol-passkey")
    form.locator("[name=human]").fill("alice-phone")
    form.locator("button[type=submit]").click()     # a registration, then a signature by the first passkey
    expect(form.locator("[data-ceremony-result]")).to_contain_text(re.compile(r"enrol your passkey as alice-phone in demo .*: allow"))
    assert len(authenticator.credentials()) == before + 1
    humans = worker.cli_json("status", "--repo", "demo", "--human", "alice-cli")["humans"]
    assert humans["alice-phone"]["alg"].startswith("webauthn-")

    # 6. an agent session started in the console; its workspace made from the token shown once
    page.goto(console.url + "/r/demo/sessions")
    result = sign(page, "form[data-ceremony='session.start']", agent="ada", task="round the fee")
    token = token_of(result)
    assert copy(page, page.locator("button[data-copy='#agent-token']")) == token
    join = copy(page, page.locator("button[data-copy='#join-command']"))
    shot(page, "session-join")
    assert join.startswith("lonca session join --dir demo-ada-") and token not in join
    joined = worker.cli(*join.split()[1:], "--json", input=token + "\n", check=True)
    ws = json.loads(joined.stdout)["workspace"]
    assert oct((Path(ws) / ".lonca" / "session").stat().st_mode & 0o777) == "0o600"
    assert token not in joined.stdout + joined.stderr

    # 7. the agent proposes from its workspace with the CLI; the change waits for a human
    worker.cli("lease", "acquire", "app.py#charge", "--intent", "round the fee", cwd=ws, check=True)
    (Path(ws) / "app.py").write_text("def charge(amount):\n    return round(amount * 2, 2)\n")
    proposed = json.loads(worker.cli("propose", "-m", "round the fee", "--json", cwd=ws, check=True).stdout)
    assert proposed["status"] == "pending" and "review_required" in proposed["decision"]["reasons"]

    # 8. the browser approves; the change integrates, live
    page.goto(console.url + "/r/demo/review")
    page.locator(f"#review a:has-text('{proposed['change'][:12]}')").click()
    page.wait_for_url(re.compile(rf"/changes/{proposed['change']}$"))
    assert "allow" in sign(page, "form[data-ceremony='approve']", note="looks right")
    expect(page.locator("#change dd[data-status]")).to_have_text("integrated", timeout=30_000)
    events = json.loads(worker.cli("events", "--from", "1", "--json", cwd=ws, check=True).stdout)["events"]
    assert {"approved", "integrated"} <= {e["kind"] for e in events}
    assert worker.cli("audit", "verify").returncode == 0

    # 9. the second passkey logs in on its own (the first one gone from this authenticator)
    page.click("form.who button[type=submit]")
    page.wait_for_url(re.compile(r"/login$"))
    first = next(c for c in authenticator.credentials() if c["userHandle"] != base64.b64encode(b"alice-phone").decode())
    authenticator.cdp.send("WebAuthn.removeCredential", {"authenticatorId": authenticator.id, "credentialId": first["credentialId"]})
    login(page, console, "alice-phone")
    page.wait_for_url(re.compile(r"/r/demo/review$"))
    expect(page.locator("form.who")).to_contain_text("alice-phone")

