// Live updates: the page's SSE stream (body[data-live]) becomes DOM events on which htmx refreshes
// fragments: `lonca:log` for every entry, `lonca:state` for every entry but an observation (a
// heartbeat or a hook's report changes nothing a review page shows, so it does not redraw one).
// A fragment marked data-parts is not swapped whole: only its parts ([data-part], each with the
// digest of its HTML) whose digest changed are replaced, so an opened check log, a selection or
// a half-typed comment in an unchanged part stay as they are. Ages, elapsed times and countdowns
// tick here.
"use strict";
(function () {
  const QUIET_OPS = new Set(["observe"]);

  function announce(detail) {
    document.body.dispatchEvent(new CustomEvent("lonca:log", {detail}));
    if (!QUIET_OPS.has(detail.op)) document.body.dispatchEvent(new CustomEvent("lonca:state", {detail}));
  }

  function follow() {
    const url = document.body.dataset.live;
    if (!url) return;
    const status = document.getElementById("live-status");
    const source = new EventSource(url);
    // once the stream follows the log, the fragments are read again: what was logged between the
    // page's rendering and the stream's start would otherwise show only at the next entry
    source.addEventListener("hello", (ev) => { status.textContent = ""; announce(JSON.parse(ev.data)); });
    source.addEventListener("log", (ev) => announce(JSON.parse(ev.data)));
    source.addEventListener("stopped", (ev) => {
      const why = JSON.parse(ev.data);
      if (why.final) {      // the worker refused this page's repository: retrying would not help
        source.close();
        status.textContent = `Live updates stopped: ${why.error}`;
      }
    });
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) status.textContent = "Live updates paused; reconnecting…";
    };
  }

  function swapParts(target, html) {
    const fresh = document.createElement("template");
    fresh.innerHTML = html;
    const parts = [...fresh.content.children];
    const same = parts.length === target.children.length &&
      parts.every((p, i) => p.id && target.children[i].id === p.id);
    if (!same) {           // another shape (the change left review, say): draw it whole
      target.replaceChildren(fresh.content);
      htmx.process(target);
    } else {
      parts.forEach((p, i) => {
        const old = target.children[i];
        if (old.dataset.digest === p.dataset.digest) return;
        // a check log the reader opened or closed stays so
        old.querySelectorAll("details[id]").forEach((d) => {
          const twin = p.querySelector(`details[id="${CSS.escape(d.id)}"]`);
          if (twin) twin.open = d.open;
        });
        old.replaceWith(p);
        htmx.process(p);
      });
    }
    tick();
    target.dispatchEvent(new CustomEvent("lonca:parts", {bubbles: true}));
  }

  document.addEventListener("htmx:beforeSwap", (ev) => {
    const target = ev.detail.target;
    if (!target.hasAttribute("data-parts") || ev.detail.xhr.status !== 200) return;
    ev.detail.shouldSwap = false;
    swapParts(target, ev.detail.serverResponse);
  });

  function countdown(ms) {
    if (ms <= 0) return "expired";
    const s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60);
    return h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
  }

  function span(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor(s % 3600 / 60)}m`;
    return `${Math.floor(s / 86400)}d`;
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll("[data-expires]").forEach((el) => {
      el.textContent = countdown(Number(el.dataset.expires) - now);
    });
    document.querySelectorAll("[data-since]").forEach((el) => {
      el.textContent = `${span(now - Number(el.dataset.since))} ago`;
    });
    document.querySelectorAll("[data-elapsed]").forEach((el) => {
      el.textContent = span(now - Number(el.dataset.elapsed));
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    follow();
    tick();
    setInterval(tick, 1000);
    document.body.addEventListener("htmx:afterSwap", tick);   // a redrawn part's times, at once
  });
})();
