"""hook.input (seed 001): what a hook program got from its harness, untouched, read with the
harness's profile (the repository's policy, lonca/harness.py's PROFILES where it names none) into one of the moments Lonca hooks, and answered
with what the hook program does next, in the harness's own shape:

- session_start: {"phase", "session", "context": the harness's answer with a "{context}" hole,
  "tool_prefix"}; the program calls hook.bind, fills the hole with what the model should know of
  its session, naming the lonca mcp tools with tool_prefix;
- stop: {"phase": "stop"}; the program calls hook.stop with the workspace's local files;
- a tool call: what hook.event answers (judge), plus "output" on a denial, and after the tool,
  where the harness takes context then, what the session's inbox holds, once;
- input (a prompt the user sent, which the seed does not name): the inbox's news as "output".

A harness without a profile, or an event its profile does not have, is invalid. The write tools'
files and base come beside the input, as for hook.event: the worker reads no workspace."""
from lonca.harness import PROFILES, context_output, deny_output
from lonca.protocol import LoncaError

from .event_methods import inbox
from .hook_methods import judge
from .methods import Call, method


@method("hook.input", "agent", writes=True)
async def hook_input(call: Call) -> dict:
    p = call.params
    harness, raw = p["harness"], p["input"]
    policy = call.repo_state().policy
    profile = policy.profile(harness)
    if profile is None:
        known = sorted(h for h in {*PROFILES, *policy.harnesses} if policy.profile(h))
        raise LoncaError("invalid", f"no profile for the harness {harness[:64]!r}: Lonca reads the events of "
                                    f"{', '.join(known)}; send a known harness's name, give this one a profile in "
                                    "lonca.toml ([harnesses.<name>] events, docs/policy.md), or send hook.event's "
                                    "own fields")
    event = raw.get("hook_event_name")
    moment = profile["events"].get(event) if isinstance(event, str) else None
    if moment is None:
        raise LoncaError("invalid", f"input.hook_event_name is not an event Lonca hooks of {harness}: one of "
                                    f"{', '.join(profile['events'])}")
    if moment == "session_start":
        return {"phase": moment, "session": call.auth.session, "context": context_output(harness, event, "{context}"),
                "tool_prefix": profile["tool_prefix"]}
    if moment == "stop":
        return {"phase": moment}
    if moment == "input":
        return {"phase": moment, **await _news(call, harness, event)}
    tool, tool_input, cwd = raw.get("tool_name"), raw.get("tool_input"), raw.get("cwd")
    params = {"hook_event_name": "PreToolUse" if moment == "before_tool" else "PostToolUse",
              "tool_name": tool[:256] if isinstance(tool, str) else None,
              "tool_input": tool_input if isinstance(tool_input, dict) else {},
              "cwd": cwd if isinstance(cwd, str) and cwd.startswith("/") else None,
              "workspace": p["workspace"], "harness": harness, "base": p.get("base"), "files": p.get("files")}
    out = {"phase": moment, **await judge(call, params)}
    if moment == "before_tool" and out["decision"] == "deny":
        out["output"] = deny_output(harness, out["reason"])
    elif moment == "after_tool" and profile["tool_context"]:
        out.update(await _news(call, harness, event))
    return out


async def _news(call: Call, harness: str, event: str) -> dict:
    """What other sessions want of the agent and it was not told, as the harness's context answer
    (and then it is told); nothing when there is no news."""
    text = (await inbox(call))["text"]
    return {"output": context_output(harness, event, text)} if text else {}
