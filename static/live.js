// Live updates: the page's SSE stream (body[data-live]) becomes the DOM event `lonca:log`, on
// which htmx refreshes fragments (hx-trigger="lonca:log from:body"); and countdowns tick.
"use strict";
(function () {
  function follow() {
    const url = document.body.dataset.live;
    if (!url) return;
    const status = document.getElementById("live-status");
    const source = new EventSource(url);
    // once the stream follows the log, the fragments are read again: what was logged between the
    // page's rendering and the stream's start would otherwise show only at the next entry
    source.addEventListener("hello", (ev) => {
      status.textContent = "";
      document.body.dispatchEvent(new CustomEvent("lonca:log", {detail: JSON.parse(ev.data)}));
    });
    source.addEventListener("log", (ev) => {
      document.body.dispatchEvent(new CustomEvent("lonca:log", {detail: JSON.parse(ev.data)}));
    });
    source.onerror = () => { status.textContent = "Live updates paused; reconnecting…"; };
  }

  function countdown(ms) {
    if (ms <= 0) return "expired";
    const s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60);
    return h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll("[data-expires]").forEach((el) => {
      el.textContent = countdown(Number(el.dataset.expires) - now);
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    follow();
    tick();
    setInterval(tick, 1000);
  });
})();
