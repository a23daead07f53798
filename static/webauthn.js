// WebAuthn ceremonies: a form with data-register creates a credential, a form with
// data-ceremony="<kind>" signs an operation. The server builds what is signed; this file only
// carries options to the authenticator and its answer back (DESIGN.md, "WebAuthn").
"use strict";
(function () {
  const csrf = () => document.querySelector('meta[name="csrf-token"]').content;

  async function post(url, body) {
    const res = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf()},
      body: JSON.stringify(body),
    });
    let data;
    try { data = await res.json(); } catch (e) { data = {ok: false, error: `the console answered ${res.status}`}; }
    if (!res.ok || !data.ok) throw new Error(data.error || `the console answered ${res.status}`);
    if (data.csrf) {
      // the session's id changed (a key registered): its CSRF token with it
      document.querySelector('meta[name="csrf-token"]').content = data.csrf;
      document.body.setAttribute("hx-headers", JSON.stringify({"X-CSRF-Token": data.csrf}));
    }
    return data;
  }

  function show(form, text, kind) {
    const out = form.querySelector("[data-ceremony-result]");
    out.textContent = text;
    out.className = "result " + kind;
    out.setAttribute("role", kind === "error" ? "alert" : "status");
  }

  function fields(form) {
    const body = {};
    new FormData(form).forEach((v, k) => { body[k] = v; });
    return body;
  }

  function browserError(e) {
    if (e && e.name === "NotAllowedError") return "the key was not used (cancelled or timed out); try again";
    return e && e.message ? e.message : String(e);
  }

  async function register(form) {
    const begun = await post("/webauthn/register/begin", fields(form));
    show(form, "Touch your security key…", "wait");
    const options = PublicKeyCredential.parseCreationOptionsFromJSON(begun.options);
    const credential = await navigator.credentials.create({publicKey: options});
    const done = await post("/webauthn/register/finish", {credential: credential.toJSON()});
    show(form, done.message, "ok");
    if (done.next === "enrol-own") return sign(form);  // a passkey of the human logged in: sign its enrolment
    if (done.next === "bootstrap") {
      const next = document.getElementById("bootstrap");
      next.hidden = false;
      next.querySelector("input").focus();
    }
  }

  function shown(id, text) {
    const code = document.createElement("code");
    code.className = "once";
    code.id = id;
    code.textContent = text;
    return code;
  }

  function copyButton(id, label) {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.copy = "#" + id;
    b.textContent = label;
    return b;
  }

  async function sign(form) {
    const body = fields(form);
    body.kind = form.dataset.ceremony;
    const begun = await post("/ceremony/begin", body);
    show(form, `Touch your security key to ${begun.summary}…`, "wait");
    const options = PublicKeyCredential.parseRequestOptionsFromJSON(begun.options);
    const credential = await navigator.credentials.get({publicKey: options});
    const done = await post("/ceremony/finish", {ceremony: begun.ceremony, credential: credential.toJSON()});
    show(form, done.message, done.outcome === "deny" ? "error" : "ok");
    if (done.push) {  // git's porcelain output of a push
      const pre = document.createElement("pre");
      pre.className = "push-output";
      pre.textContent = done.push;
      form.querySelector("[data-ceremony-result]").append(pre);
    }
    if (done.agent_token) {
      const out = form.querySelector("[data-ceremony-result]");
      out.append(document.createElement("br"), "The agent's token, shown once: ", shown("agent-token", done.agent_token),
                 copyButton("agent-token", "Copy token"), document.createElement("br"),
                 "Make the agent's workspace (lonca on PATH, as the worker's user) and paste the token when it asks: ",
                 shown("join-command", done.join), copyButton("join-command", "Copy command"));
    }
    if (done.login) {  // a rotation or a recovery: the old key's sessions ended, log in with the new one
      const a = document.createElement("a");
      a.href = done.login;
      a.textContent = "Log in with the new passkey";
      form.querySelector("[data-ceremony-result]").append(" ", a);
    }
    if (done.redirect) window.location.assign(done.redirect);
    else if (form.hasAttribute("data-reload")) setTimeout(() => window.location.reload(), 800);
  }

  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    const run = form.hasAttribute("data-register") ? register : form.dataset.ceremony ? sign : null;
    if (!run) return;
    ev.preventDefault();
    if (!window.PublicKeyCredential) {
      show(form, "this browser has no WebAuthn: use a current browser over https or on localhost", "error");
      return;
    }
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    show(form, "Asking the console…", "wait");
    run(form).catch((e) => show(form, browserError(e), "error")).finally(() => { button.disabled = false; });
  });
})();
